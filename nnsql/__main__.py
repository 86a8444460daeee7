"""`python -m nnsql`: the `nnsql` command (nnsql/cli.py)."""

from nnsql.cli import run

if __name__ == "__main__":
    run()
