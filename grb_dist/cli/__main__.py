"""``python -m grb_dist.cli``: the same as ``grb-dist``."""

from grb_dist.cli import main

if __name__ == "__main__":
    main()
