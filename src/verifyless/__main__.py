"""``python -m verifyless``: the same CLI as the ``verifyless`` script."""

from verifyless.cli import main

if __name__ == "__main__":
    main()
