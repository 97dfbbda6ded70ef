"""Injection attacks, one module each: ``rnd``, ``fgsm``, ``pgd``, ``speit``, ``tdgia``;
``common`` holds the shared machinery. The name -> class table is
:data:`grb_dist.attacks.registry.INJECTION` (this package imports nothing, to keep imports acyclic).
"""
