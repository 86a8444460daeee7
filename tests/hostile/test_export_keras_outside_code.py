"""Keras's own layers that run code kept outside the model file. Found by the third hostile pass of
issue 32: the exporter's check before loading passed every class of Keras's public namespaces, and
`keras.layers.TFSMLayer` is one: its configuration names another SavedModel by path, whose TensorFlow
graph (reading and writing files is among its operations) Keras loads and the parity check runs. Keras
refuses it in safe mode only from 3.14 on (CVE-2026-1462), and nnsql accepts Keras 3.10 and later;
a `TorchModuleWrapper` holds a pickle, a `JaxLayer` or `FlaxLayer` functions. Each is refused by the
exporter itself now, naming the layer, whatever the installed Keras does."""

from __future__ import annotations

import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend.model import load_model
from tests.export.test_model_files import dense_config, rewrite_keras_config

CONFIGS = {
    "TFSMLayer": {"name": "hidden", "filepath": "/tmp/nnsql-no-such-savedmodel", "call_endpoint": "serve"},
    "TorchModuleWrapper": {"name": "hidden", "module": "gASVAAAAAAAAAAAu"},
    "JaxLayer": {"name": "hidden", "call_fn": "relu"},
    "FlaxLayer": {"name": "hidden", "module": "relu"},
}


@pytest.mark.parametrize("class_name", sorted(CONFIGS))
def test_a_keras_layer_holding_outside_code_is_refused_by_the_exporter(cern_mlp_path, tmp_path, class_name):
    def change(config):
        layer = dense_config(config, "hidden")
        layer.update(class_name=class_name, module="keras.layers", config=CONFIGS[class_name])

    path = rewrite_keras_config(cern_mlp_path, tmp_path / "outside.keras", change)
    with pytest.raises(
        ExportError, match=f"refusing to load .*layer 'hidden' \\({class_name}\\): a {class_name}"
    ):
        load_model(path)
