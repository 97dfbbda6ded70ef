"""What a sweep will cost, before it runs (``grb-dist sweep --plan``).

- :mod:`~grb_dist.sweep.cost.predict`: the forecast of a prepared run's missing cells on a
  cluster (:func:`~grb_dist.sweep.cost.predict.predict_cost`);
- :mod:`~grb_dist.sweep.cost.calibrate`: measuring each kind of task on this machine (or on
  samples of a large graph), cached per machine;
- :mod:`~grb_dist.sweep.cost.targeted`: a per-target scenario's attacks and scoring, measured
  per target (each target attacked and scored alone) on a few targets;
- :mod:`~grb_dist.sweep.cost.scaling`: how the figures measured on samples grow to the whole graph;
- :mod:`~grb_dist.sweep.cost.checks`: one measurement of each kind on the whole graph, against
  what the samples extrapolate;
- :mod:`~grb_dist.sweep.cost.machine`: the machine's identity that names the calibration
  cache, and the measured start-up of a local Ray;
- :mod:`~grb_dist.sweep.cost.forecast`: the cost model: tasks on the cluster's slots, wall
  time per stage and in total, peak memory per task.

This package imports none of them: import the module you need.
"""
