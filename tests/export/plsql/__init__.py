"""An interpreter of the PL/SQL subset nnsql generates for Oracle, so the generated text itself runs in
the tests: lexer, parser, interpreter (closures over the syntax tree), Oracle's values and built-ins,
UTL_NLA's BLAS calls, a table store for the scripts' SQL, and a session that runs SQL*Plus scripts."""
