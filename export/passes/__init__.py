"""The passes of the compile pipeline, one module each; export/compile.py runs them in order."""
