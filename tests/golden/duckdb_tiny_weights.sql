-- The weights of model tiny, version 3, as its macros read them: built once, when the
-- version is published, from its rows of nnsql.tensors (which stay the record), and removed with the
-- version. A one-element list of one struct, so that tiny.params() returns it without a copy.
CREATE OR REPLACE TABLE nnsql.weights_tiny_v3 AS SELECT [{
    hidden: (
        SELECT list_transform(
            range(2),
            lambda _nn_j: {
                w: list_select(k.value, range(_nn_j * 3 + 1, (_nn_j + 1) * 3 + 1)),
                b: b.value[_nn_j + 1]
            }
        ) FROM nnsql.tensors k,
        nnsql.tensors b WHERE k.model = 'tiny' AND k.version = 3 AND k.tensor = 'hidden.kernel' AND b.model =
            'tiny' AND b.version = 3 AND b.tensor = 'hidden.bias'
    ),
    output: (
        SELECT list_transform(
            range(2),
            lambda _nn_j: {w: list_select(k.value, range(_nn_j * 2 + 1, (_nn_j + 1) * 2 + 1)), b: 0.0}
        ) FROM nnsql.tensors k WHERE k.model = 'tiny' AND k.version = 3 AND k.tensor = 'output.kernel'
    )
}] AS p;
