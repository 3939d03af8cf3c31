"""`python -m arcforge.cli ...`: the same as the `arcforge` console script (torchrun launches
`arcforge run --nproc N` this way)."""

from arcforge.cli import main

if __name__ == "__main__":
    main()
