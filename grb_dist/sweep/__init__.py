"""The sweep: every attack against every defense, per difficulty, on Ray.

- :mod:`~grb_dist.sweep.job`, :mod:`~grb_dist.sweep.overrides`: job files and the command line's
  changes to them;
- :mod:`~grb_dist.sweep.resolve`: one validation pass that builds every model spec and attack;
- :mod:`~grb_dist.sweep.cells`: the cells of a run (model tasks, attack and score cells) and
  the work a run still needs; :mod:`~grb_dist.sweep.preflight`: checks against the loaded
  graph and the machine before anything is written;
- :mod:`~grb_dist.sweep.session`: preparing a run before Ray starts, finishing it, and the steps
  of a run (:func:`~grb_dist.sweep.session.run`) that ``grb-dist sweep`` and ``benchmark()`` share;
- :mod:`~grb_dist.sweep.cost`: what a run will cost (``sweep --plan``): calibration and forecast;
- :mod:`~grb_dist.sweep.worker`: the work as plain Python (train, attack, score, poison);
- :mod:`~grb_dist.sweep.tasks`: that work and the Scorer actor handed to the Ray floor
  (:mod:`grb_dist.cluster`), the only way the runner reaches Ray;
- :mod:`~grb_dist.sweep.runner`: the driver's bookkeeping of a run (what is in flight, done);
- :mod:`~grb_dist.sweep.progress`: the progress a run reports and its two displays.

This package imports none of them: import the module you need.
"""
