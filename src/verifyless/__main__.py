"""``python -m verifyless``: the same CLI as the ``verifyless`` script."""

from verifyless._cli import main

if __name__ == "__main__":
    main()
