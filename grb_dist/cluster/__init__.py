"""The Ray floor: what the sweep and the study ask of Ray, for both alike.

- :mod:`~grb_dist.cluster.ray_edge`: the only module of grb_dist that imports Ray: joining or
  starting Ray, the object store, tasks and actors of plain functions and classes handed to
  it, work units with a bound on work in flight, Ray's failures as ``TaskFailed`` /
  ``ActorLost``;
- :mod:`~grb_dist.cluster.settings`: every Ray option (:class:`RaySettings`), checked without Ray;
- :mod:`~grb_dist.cluster.reaper`: the watchdog that ends a local Ray whose driver died.

It knows neither the sweep nor the study. This package imports none of them: import the
module you need.
"""
