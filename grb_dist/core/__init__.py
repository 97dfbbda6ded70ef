"""The ground floor: what every other part of grb_dist shares and nothing of it depends on.

errors, typed configs, the numpy graph types, names (scenarios, difficulties, the name rule),
the registry type, atomic file writing and the version. No torch, no Ray, nothing of
grb_dist above this package.
"""
