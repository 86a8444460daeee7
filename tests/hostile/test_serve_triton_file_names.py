"""A file name a Triton `config.pbtxt` chooses (an output's `label_filename`, `default_model_filename`)
is shown escaped in the reason the index gives and the log says. Found by the fifth hostile pass of issue
32: a `label_filename` holding a line break cut the reason to what came before the break (`cannot load
evil version 1: l`), so the operator read no cause at all; the reason must name the file, escaped, and
why it could not be read."""

from __future__ import annotations

from tests.hostile.test_serve_repository_input import IRIS_CONFIG, states, triton_model


def test_a_label_file_name_with_a_line_break_is_named_escaped(tmp_path):
    config = IRIS_CONFIG.replace('label_filename: "labels.txt"', 'label_filename: "l\\nabels.txt"')
    triton_model(tmp_path, "evil", config=config)
    reason = states(tmp_path)["evil"]
    assert "\n" not in reason and "\x1b" not in reason
    assert reason.endswith("l\\nabels.txt: No such file or directory"), reason


def test_a_model_file_name_with_an_escape_is_named_escaped(tmp_path):
    config = IRIS_CONFIG.replace("max_batch_size", 'default_model_filename: "m\\033[2J.onnx"\nmax_batch_size')
    triton_model(tmp_path, "evil", config=config)
    reason = states(tmp_path)["evil"]
    assert "\x1b" not in reason
    assert "m\\x1b[2J.onnx" in reason, reason
