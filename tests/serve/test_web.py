"""/score, /metrics, /openapi.json, API keys, access logs, and the drawing page in headless Chromium."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest
import requests


def test_score_returns_class_label_and_probabilities(live):
    answer = requests.post(f"{live.url}/score?model=mnist", json={"features": [0.0] * 784}).json()
    assert set(answer) == {"model", "version", "class", "label", "probabilities", "classes"}
    assert len(answer["probabilities"]) == 10 and abs(sum(answer["probabilities"]) - 1) < 1e-5
    assert answer["label"] == answer["classes"][answer["class"]]
    bad = requests.post(f"{live.url}/score?model=mnist", json={"pixels": []})
    assert bad.status_code == 400 and "features" in bad.json()["error"]


def test_metrics_count_requests_and_batches(live):
    for _ in range(3):
        requests.post(f"{live.url}/score?model=mnist", json={"features": [0.1] * 784})
    requests.post(f"{live.url}/score?model=mnist", json={"features": [0.1] * 3})
    text = requests.get(f"{live.url}/metrics").text
    assert 'nnsql_requests_total{model="mnist",protocol="score",status="ok",version="1"} 3.0' in text
    assert (
        'nnsql_requests_total{model="mnist",protocol="score",status="error",version="1"}' not in text
    )  # rejected before
    assert "nnsql_request_seconds_bucket" in text and 'nnsql_batch_rows_count{model="mnist"}' in text
    assert 'nnsql_queue_depth{model="mnist/1"} 0.0' in text


def test_openapi_document_lists_the_routes(live):
    document = requests.get(f"{live.url}/openapi.json").json()
    assert document["openapi"].startswith("3.")
    assert {"/v2/models/{name}/infer", "/v1/models/{name}:predict", "/score"} <= set(document["paths"])


def test_api_key_guards_everything_but_health(serve_app, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("s3cret-key\n")
    server = serve_app(API_KEY_FILE=str(keys))
    body = {"features": [0.0] * 784}
    denied = requests.post(f"{server.url}/score?model=mnist", json=body)
    assert denied.status_code == 401 and denied.headers["WWW-Authenticate"] == "Bearer"
    assert (
        requests.post(
            f"{server.url}/score?model=mnist", json=body, headers={"X-API-Key": "wrong"}
        ).status_code
        == 401
    )
    assert requests.post(
        f"{server.url}/score?model=mnist", json=body, headers={"Authorization": "Bearer s3cret-key"}
    ).ok
    assert (
        requests.get(f"{server.url}/v2/health/ready").ok and requests.get(f"{server.url}/v2/health/live").ok
    )
    assert requests.get(f"{server.url}/metrics").status_code == 401


def test_access_log_is_structured_and_holds_no_payload(live, caplog):
    caplog.set_level(logging.INFO, logger="serve.access")
    requests.post(f"{live.url}/score?model=mnist", json={"features": [0.123456] * 784})
    entries = [json.loads(r.getMessage()) for r in caplog.records if r.name == "serve.access"]
    entry = entries[-1]
    assert entry["path"] == "/score" and entry["status"] == 200 and entry["model"] == "mnist"
    assert "0.123456" not in caplog.text


@pytest.mark.skipif(
    not (shutil.which("chromium") and shutil.which("chromedriver")),
    reason="Debian's chromium and chromium-driver are not installed (make setup installs them as root)",
)
def test_drawing_page_in_headless_chromium(live, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

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
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.set_window_size(900, 700)
        driver.get(live.url + "/")
        canvas = driver.find_element(By.ID, "canvas")
        stroke = ActionChains(driver).move_to_element_with_offset(canvas, -20, -90).click_and_hold()
        for _ in range(9):
            stroke = stroke.move_by_offset(4, 20)
        stroke.release().perform()
        WebDriverWait(driver, 15).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#bars .bar")) == 10)
        prediction = driver.find_element(By.ID, "prediction").text
        widths = [
            bar.find_element(By.CLASS_NAME, "fill").size["width"]
            for bar in driver.find_elements(By.CSS_SELECTOR, "#bars .bar")
        ]
        driver.save_screenshot(str(tmp_path / "page.png"))
        if os.environ.get("SCREENSHOT_DIR"):  # keep it for a person to look at
            shutil.copy(tmp_path / "page.png", os.environ["SCREENSHOT_DIR"])
    finally:
        driver.quit()
    classes = requests.get(f"{live.url}/v2/models/mnist").json()["parameters"]["classes"]
    assert prediction.removeprefix("Prediction: ") in classes
    assert abs(sum(widths) - 300) <= 10  # bars are 300 px × probability, which sum to 1
    assert (tmp_path / "page.png").stat().st_size > 1000
