"""The page at / in headless Chromium: an image model drawn, a tabular model typed and pasted, a sequence
model (two inputs, a regression value) pasted as CSV, chosen from the list, by keyboard or by URL; and
hostile labels, model names and metadata that stay text under the Content-Security-Policy.

Screenshots go to build/screenshots/ (listed at the end of the run) for a person to look at."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import quote

import keras
import numpy as np
import pytest
import requests

from nnsql.export.onnx.__main__ import export as export_onnx
from tests import models
from tests.conftest import SCREENSHOTS

FASHION = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat"]
FASHION += ["Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
IRIS = ["setosa", "versicolor", "virginica"]
# Each payload counts itself in window.__xss and copies the API key typed on the page into the title.
PAYLOAD = "window.__xss=(window.__xss||0)+1;document.title='stolen:'+document.getElementById('key').value"
HOSTILE_NAME = f'<img src=x onerror="{PAYLOAD}">'
HOSTILE_LABELS = [f'<img src=x{i} onerror="{PAYLOAD}">' for i in range(9)] + ["<b>bold</b>"]

pytestmark = [
    pytest.mark.slow,  # a browser and four exports: about a minute for the module
    pytest.mark.skipif(
        not (shutil.which("chromium") and shutil.which("chromedriver")),
        reason="Debian's chromium and chromium-driver are not installed (make setup installs them as root)",
    ),
]


def tabular_model() -> keras.Model:
    inputs = keras.Input((4,), name="measurements")
    hidden = keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    return models._seeded(keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden)), 5)


def sequence_model() -> keras.Model:
    """A masked GRU over steps of any number, beside two summary features: one regression value."""
    steps = keras.Input((None, 3), name="steps")
    summary = keras.Input((2,), name="summary")
    state = keras.layers.GRU(4, name="gru")(keras.layers.Masking(0.0)(steps))
    joined = keras.layers.Concatenate()([state, summary])
    energy = keras.layers.Dense(1, name="energy")(joined)
    model = models._seeded(keras.Model([steps, summary], energy), 6)
    model.compile(loss="mse")  # a regression, as its user trains it: the export reads values
    return model


@pytest.fixture(scope="session")
def page_repo(tmp_path_factory, onnx_repo) -> Path:
    """Four kinds of model, and a copy of the MNIST one whose name, labels and metadata are hostile."""
    repo = tmp_path_factory.mktemp("page_repository")
    made = tmp_path_factory.mktemp("page_models")
    exports = {
        "fashion": (models.tf_spawner_cnn(), FASHION),
        "iris": (tabular_model(), IRIS),
        "sequence": (sequence_model(), ["energy"]),
    }
    for name, (model, classes) in exports.items():
        export_onnx(models.save(model, made / name, classes), repo, name, 50, 1e-5)
    shutil.copytree(onnx_repo / "mnist", repo / "mnist")
    multilabel = repo / "tags" / "1"  # iris, read as independent labels: the kind named in the metadata
    shutil.copytree(repo / "iris" / "1", multilabel)
    metadata = json.loads((multilabel / "metadata.json").read_text())
    metadata.update(kind="multilabel", threshold=0.3)
    (multilabel / "metadata.json").write_text(json.dumps(metadata))
    hostile = repo / HOSTILE_NAME / "1"
    shutil.copytree(onnx_repo / "mnist" / "1", hostile)
    metadata = json.loads((hostile / "metadata.json").read_text())
    metadata.update(classes=HOSTILE_LABELS)  # its sha256 is checked: only the labels can carry markup
    (hostile / "metadata.json").write_text(json.dumps(metadata))
    return repo


@pytest.fixture
def page_server(serve_app, page_repo):
    return serve_app(REPO=str(page_repo))


@pytest.fixture
def chromium(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_window_size(1100, 900)
    yield driver
    driver.quit()


def screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 5000
    return path


def wait(driver, condition, seconds: float = 20):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds).until(condition)


def by_css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def loaded(driver, fieldsets: int) -> None:
    """Wait for the chosen model's metadata and input editors."""
    wait(driver, lambda d: len(by_css(d, "#fields fieldset")) == fieldsets and by_css(d, "#about dd"))


def draw_stroke(driver, canvas) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    stroke = ActionChains(driver).move_to_element_with_offset(canvas, -10, -90).click_and_hold()
    for _ in range(9):
        stroke = stroke.move_by_offset(3, 20)
    stroke.release().perform()


def bars(driver) -> list[tuple[str, float]]:
    return [
        (
            bar.find_element("css selector", ".name").text,
            bar.find_element("css selector", ".fill").size["width"],
        )
        for bar in by_css(driver, ".bar")
    ]


def test_image_model_chosen_from_the_list_and_drawn(page_server, chromium):
    from selenium.webdriver.support.ui import Select

    chromium.get(page_server.url + "/")
    wait(chromium, lambda d: len(Select(d.find_element("id", "model")).options) == 6)
    names = [option.text for option in Select(chromium.find_element("id", "model")).options]
    assert names == sorted(["fashion", "iris", "mnist", "sequence", "tags", HOSTILE_NAME])
    Select(chromium.find_element("id", "model")).select_by_value("fashion")
    wait(chromium, lambda d: "fashion" in d.current_url)
    loaded(chromium, 1)
    assert chromium.current_url.endswith("/?model=fashion&version=1")  # the page says where it is
    legend = by_css(chromium, "#fields legend")[0].text
    assert legend == "image FP32 [any, 28, 28, 1]"
    draw_stroke(chromium, by_css(chromium, "canvas.draw")[0])
    wait(chromium, lambda d: len(bars(d)) == 10)
    shown = bars(chromium)
    assert [label for label, _ in shown] == FASHION
    assert abs(sum(width for _, width in shown) - 300) <= 10  # 300 px × probabilities summing to 1
    prediction = chromium.find_element("id", "prediction").text
    assert prediction.removeprefix("Prediction: ") in FASHION
    about = chromium.find_element("id", "about").text
    assert "onnxruntime_onnx" in about and "Pullover" in about
    screenshot(chromium, "image-model-fashion")

    # By keyboard alone: Delete clears the drawing, arrows draw, Enter predicts.
    from selenium.webdriver.common.keys import Keys

    canvas = by_css(chromium, "canvas.draw")[0]
    chromium.find_element("id", "clear").click()
    assert not bars(chromium) and lit_pixels(chromium, canvas) == 0
    canvas.send_keys(*[Keys.ARROW_UP] * 3, *[Keys.ARROW_DOWN] * 6)
    assert lit_pixels(chromium, canvas) > 1000  # a stroke 6 steps long
    canvas.send_keys(Keys.DELETE)
    assert lit_pixels(chromium, canvas) == 0
    canvas.send_keys(*[Keys.ARROW_LEFT] * 4, Keys.ENTER)
    wait(chromium, lambda d: len(bars(d)) == 10)


def lit_pixels(driver, canvas) -> int:
    """The drawing area's pixels that are not black."""
    script = (
        "const data = arguments[0].getContext('2d').getImageData(0, 0, 280, 280).data;"
        "let lit = 0; for (let i = 0; i < data.length; i += 4) if (data[i] > 0) lit += 1; return lit;"
    )
    return driver.execute_script(script, canvas)


def test_tabular_model_typed_and_pasted_by_keyboard(page_server, chromium):
    from selenium.webdriver.common.keys import Keys

    chromium.get(page_server.url + "/?model=iris&version=1")  # the documented URL
    loaded(chromium, 1)
    cells = by_css(chromium, ".cells input")
    assert len(cells) == 4
    row = [5.1, 3.5, 1.4, 0.2]
    paste = by_css(chromium, "#fields textarea")[0]
    paste.send_keys("5.1, 3.5, 1.4, 0.2")
    assert [float(cell.get_attribute("value")) for cell in cells] == row
    cells[3].clear()
    cells[3].send_keys("0.25", Keys.ENTER)  # Enter in a field submits the form: predict
    wait(chromium, lambda d: len(bars(d)) == 3)
    expected = requests.post(
        f"{page_server.url}/v2/models/iris/infer",
        json={
            "inputs": [
                {"name": "measurements", "shape": [1, 4], "datatype": "FP32", "data": [*row[:3], 0.25]}
            ]
        },
    ).json()["outputs"][0]["data"]
    best = IRIS[int(np.argmax(expected))]
    assert chromium.find_element("id", "prediction").text == f"Prediction: {best}"
    percents = [float(s.text.rstrip("%")) for s in by_css(chromium, ".bar .share")]
    assert np.allclose(percents, 100 * np.array(expected), atol=0.051)  # shown to 0.1 %
    focused = chromium.switch_to.active_element
    assert focused.get_attribute("aria-label") == "measurements[3]"  # the keyboard stayed where it was
    screenshot(chromium, "tabular-model-iris")


def test_an_output_kind_named_in_the_metadata(page_server, chromium):
    chromium.get(page_server.url + "/?model=tags")
    loaded(chromium, 1)
    by_css(chromium, "#fields textarea")[0].send_keys("[5.1, 3.5, 1.4, 0.2]")
    chromium.find_element("id", "predict").click()
    wait(chromium, lambda d: len(bars(d)) == 3)
    scores = requests.post(
        f"{page_server.url}/v2/models/tags/infer",
        json={
            "inputs": [
                {"name": "measurements", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}
            ]
        },
    ).json()["outputs"][0]["data"]
    chosen = [label for label, p in zip(IRIS, scores, strict=True) if p > 0.3]
    assert chromium.find_element("id", "prediction").text == f"Labels: {', '.join(chosen) or 'none'}"
    assert "multilabel" in chromium.find_element("id", "about").text


def test_sequence_model_with_two_inputs_pasted_as_csv_shows_a_value(page_server, chromium):
    chromium.get(page_server.url + "/?model=sequence")
    loaded(chromium, 2)
    legends = [legend.text for legend in by_css(chromium, "#fields legend")]
    assert legends == ["steps FP32 [any, any, 3]", "summary FP32 [any, 2]"]
    steps = [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9], [0.0, 0.0, 0.0]]
    by_css(chromium, "#fields textarea")[0].send_keys("\n".join(",".join(map(str, s)) for s in steps))
    by_css(chromium, ".cells input")[0].send_keys("0.5")
    by_css(chromium, ".cells input")[1].send_keys("-1.5")
    chromium.find_element("id", "predict").click()
    wait(chromium, lambda d: d.find_element("id", "prediction").text.startswith("Value: "))
    expected = requests.post(
        f"{page_server.url}/v2/models/sequence/infer",
        json={
            "inputs": [
                {"name": "steps", "shape": [1, 4, 3], "datatype": "FP32", "data": steps},
                {"name": "summary", "shape": [1, 2], "datatype": "FP32", "data": [0.5, -1.5]},
            ]
        },
    ).json()["outputs"][0]["data"][0]
    shown = float(chromium.find_element("id", "prediction").text.removeprefix("Value: "))
    assert shown == pytest.approx(expected, rel=1e-5)  # six significant digits
    assert not bars(chromium) and by_css(chromium, "table.values")
    screenshot(chromium, "sequence-model-regression")

    by_css(chromium, "#fields textarea")[0].clear()
    by_css(chromium, "#fields textarea")[0].send_keys("0.1, 0.2")  # 2 values for steps of 3
    chromium.find_element("id", "predict").click()
    wait(chromium, lambda d: d.find_element("id", "error").text)
    assert chromium.find_element("id", "error").text == "input steps: 2 values given, a multiple of 3 needed"


def test_hostile_labels_names_and_metadata_stay_text(page_server, chromium):
    """Fails on a page that inserts labels as markup: the payloads run and read the API key."""
    chromium.get(f"{page_server.url}/?model={quote(HOSTILE_NAME)}")
    chromium.find_element("id", "key").send_keys("secret-typed-by-the-user")
    canvas = wait(chromium, lambda d: by_css(d, "canvas"))[0]
    draw_stroke(chromium, canvas)
    wait(chromium, lambda d: len(by_css(d, ".bar")) == 10)
    assert chromium.execute_script("return window.__xss") is None
    assert "secret" not in chromium.title
    assert [label for label, _ in bars(chromium)] == HOSTILE_LABELS  # shown as the text they are
    assert not by_css(chromium, "#results img, #results b, #about svg, select img")
    from selenium.webdriver.support.ui import Select

    assert Select(chromium.find_element("id", "model")).first_selected_option.text == HOSTILE_NAME
    assert "<b>bold</b>" in chromium.find_element("id", "about").text  # the classes, as text
    screenshot(chromium, "hostile-labels-as-text")


def test_content_security_policy_blocks_inline_script(page_server, chromium):
    page = requests.get(page_server.url + "/")
    policy = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "default-src 'none'" in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.text) and not re.search(r"\son\w+=", page.text)
    assert "Content-Security-Policy" in requests.get(page_server.url + "/v2/models/mnist").headers
    chromium.get(page_server.url + "/?model=mnist")
    loaded(chromium, 1)
    # Markup smuggled in by any other way still cannot run script: the policy refuses inline handlers.
    chromium.execute_script(
        "const box = document.createElement('div');box.innerHTML = arguments[0];document.body.append(box);",
        f'<img src="/missing.png" onerror="{PAYLOAD}">',
    )
    wait(chromium, lambda d: any("Content Security Policy" in e["message"] for e in d.get_log("browser")))
    assert chromium.execute_script("return window.__xss") is None


def test_a_model_that_is_not_served_and_a_server_that_wants_a_key(serve_app, page_repo, chromium, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("page-key\n")
    server = serve_app(REPO=str(page_repo), API_KEY_FILE=str(keys))
    chromium.get(server.url + "/?model=ghost")
    wait(chromium, lambda d: "API key" in d.find_element("id", "error").text)
    chromium.find_element("id", "key").send_keys("page-key")
    chromium.find_element("id", "reload").click()
    wait(chromium, lambda d: "ghost" in d.find_element("id", "error").text)
    assert chromium.find_element("id", "error").text == 'No model named "ghost" is served here.'
    loaded(chromium, 1)  # the first model instead
    screenshot(chromium, "key-and-unknown-model")
