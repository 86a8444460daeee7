"""Training data from object storage against a real S3-protocol server on loopback (tests/s3_server.py):
listing, sharding, staging that resumes, one-line errors, and the Inclusive Classifier trained from s3://
with 2 workers through train.spawn. A live test runs against S3_TEST_URL when it is set."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

from nnsql.train import hep_data
from nnsql.train.data import local_files, tfrecords
from nnsql.train.objectstore import PRIVATE_NETWORK_ADVICE, DataError
from nnsql.train.spawn import __main__ as spawn
from nnsql.train.spawn import netns
from tests.ci_skips import needs_endpoint
from tests.conftest import REPO
from tests.fixtures import free_port
from tests.s3_server import TEST_CREDENTIALS, s3_test_server, server_client, upload
from tests.train.runs import only_run

BUCKET = "physics"


@pytest.fixture(scope="module")
def endpoint():
    with s3_test_server() as url:
        yield url


@pytest.fixture(scope="module")
def hep_objects(endpoint, tmp_path_factory):
    """Synthetic HEP TFRecords uploaded to s3://physics/hep/ (4 files) and one file to s3://physics/one/."""
    directory = tmp_path_factory.mktemp("hep_upload")
    paths = hep_data.write(directory, events=192, files=4, progress=False)
    s3 = upload(endpoint, BUCKET, "hep", paths)
    s3.upload_file(str(paths[0]), BUCKET, "one/part-00000.tfrecord")
    s3.put_object(Bucket=BUCKET, Key="hep/README.txt", Body=b"not a record")
    return {f"hep/{path.name}": path for path in paths}


@pytest.fixture
def s3_env(endpoint, monkeypatch, tmp_path):
    for key, value in TEST_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    return tmp_path / "cache"


def as_worker(monkeypatch, index: int, workers: int) -> None:
    cluster = {"worker": [f"localhost:{2000 + i}" for i in range(workers)]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    )


def test_each_worker_stages_only_its_own_shard(s3_env, hep_objects, monkeypatch):
    shards = []
    for index in (0, 1):
        as_worker(monkeypatch, index, 2)
        files = local_files(f"s3://{BUCKET}/hep/*.tfrecord", cache_dir=s3_env, progress=False)
        shards.append({os.path.relpath(f, s3_env / BUCKET) for f in files})
    assert shards[0].isdisjoint(shards[1]) and shards[0] | shards[1] == set(hep_objects)
    for key, original in hep_objects.items():
        assert (s3_env / BUCKET / key).read_bytes() == original.read_bytes()


def test_staging_resumes_and_refetches_what_changed(s3_env, hep_objects, capsys, endpoint):
    pattern = f"s3://{BUCKET}/hep/*.tfrecord"
    local_files(pattern, cache_dir=s3_env, progress=False)
    assert "4 downloaded, 0 already staged" in capsys.readouterr().out
    local_files(pattern, cache_dir=s3_env, progress=False)
    assert "0 downloaded, 4 already staged" in capsys.readouterr().out
    (s3_env / BUCKET / "hep" / "part-00001.tfrecord").write_bytes(b"truncated")
    local_files(pattern, cache_dir=s3_env, progress=False)
    assert "1 downloaded, 3 already staged" in capsys.readouterr().out
    assert (s3_env / BUCKET / "hep" / "part-00001.tfrecord").read_bytes() == hep_objects[
        "hep/part-00001.tfrecord"
    ].read_bytes()


def test_records_read_from_s3_are_the_uploaded_ones(s3_env, hep_objects):
    records = list(tfrecords(f"s3://{BUCKET}/hep/*.tfrecord", cache_dir=s3_env, progress=False))
    expected = [r for path in hep_objects.values() for r in tf.data.TFRecordDataset(str(path))]
    assert sorted(r.numpy() for r in records) == sorted(r.numpy() for r in expected)


def test_shard_by_record_splits_one_file_between_two_workers(s3_env, hep_objects, monkeypatch):
    pattern = f"s3://{BUCKET}/one/*.tfrecord"
    as_worker(monkeypatch, 0, 2)
    with pytest.raises(DataError, match=r"matches 1 file\(s\) for 2 workers.*shard='data'"):
        local_files(pattern, cache_dir=s3_env, progress=False)
    parts = []
    for index in (0, 1):
        as_worker(monkeypatch, index, 2)
        parts.append({r.numpy() for r in tfrecords(pattern, cache_dir=s3_env, shard="data", progress=False)})
    whole = {r.numpy() for r in tf.data.TFRecordDataset(str(hep_objects["hep/part-00000.tfrecord"]))}
    assert parts[0].isdisjoint(parts[1]) and parts[0] | parts[1] == whole


@pytest.mark.parametrize(
    ("pattern", "change", "message"),
    [
        ("s3://no-such-bucket/x/*.tfrecord", {}, "bucket does not exist at http://127.0.0.1"),
        (f"s3://{BUCKET}/nothing/*.tfrecord", {}, "matches no object (0 objects under"),
        (f"s3://{BUCKET}/hep/*.parquet", {}, "matches no object (5 objects under"),
        (f"s3://{BUCKET}/hep/*.tfrecord", {"AWS_ACCESS_KEY_ID": None}, "no S3 credentials for"),
        (f"s3://{BUCKET}/hep/*.tfrecord", {"AWS_ENDPOINT_URL": "closed"}, "cannot reach the S3 endpoint"),
        ("gs://bucket/x", {}, "only s3:// URLs are supported"),
    ],
)
def test_errors_say_what_to_fix_in_one_line(s3_env, hep_objects, monkeypatch, pattern, change, message):
    for key, value in change.items():
        if value is None:
            monkeypatch.delenv(key)
        else:
            monkeypatch.setenv(key, f"http://127.0.0.1:{free_port()}")
    with pytest.raises(DataError) as error:
        local_files(pattern, cache_dir=s3_env, progress=False)
    text = str(error.value)
    assert message in text and "\n" not in text and TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in text


@pytest.mark.slow
def test_inclusive_classifier_trains_from_s3_with_two_workers(endpoint, hep_objects, tmp_path, monkeypatch):
    monkeypatch.setattr(spawn, "RUNS", tmp_path / "runs")
    monkeypatch.chdir(REPO)
    env_file = tmp_path / "s3.env"
    settings = {**TEST_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "NNSQL_DATA_CACHE": str(tmp_path / "cache")}
    env_file.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    script = REPO / "train" / "inclusive_classifier.py"
    data = f"s3://{BUCKET}/hep/*.tfrecord"
    # the store is on this machine's loopback, which the workers' private network does not reach
    args = ["-w", "2", "--network", "host", "--env-file", str(env_file), str(script), "--"]
    assert spawn.main([*args, "--data", data, "--epochs", "4", "--batch-size", "16", "--quiet"]) == 0
    run_dir = only_run(tmp_path / "runs")
    metadata = json.loads((run_dir / "model" / "metadata.json").read_text())
    assert metadata["workers"] == 2 and metadata["train_accuracy"] >= 0.6  # chance is 1/3
    staged = []
    for index in (0, 1):
        log = (run_dir / "attempt-0" / f"worker-{index}.log").read_text()
        line = re.search(rf"worker {index}/2: 2 objects .* 2 downloaded.*: (.*)", log)
        assert line, log[-2000:]
        staged.append(set(line.group(1).split()))
    assert staged[0].isdisjoint(staged[1]) and staged[0] | staged[1] == set(hep_objects)


STAGE = """
from nnsql.train.data import local_files
from nnsql.train.objectstore import DataError
try:
    local_files("s3://physics/hep/*.tfrecord", cache_dir="cache", progress=False)
except DataError as error:
    print(error)
"""


def test_a_private_network_says_how_to_reach_the_store(s3_env, hep_objects, tmp_path):
    """Staged from inside a network namespace as local workers have (train/spawn/netns.py): the store on
    this machine's loopback is out of reach there, and the one line says what reaches it."""
    problem = netns.problem()
    if problem:
        pytest.skip(f"no private network here: {problem}")
    holder = netns.Holder.start()
    try:
        env = os.environ | {"PYTHONPATH": str(REPO), "NNSQL_NETWORK": "private"}
        command = holder.join([sys.executable, "-c", STAGE])
        staged = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        holder.stop()
    assert staged.stdout.splitlines() == [
        f"cannot reach the S3 endpoint {os.environ['AWS_ENDPOINT_URL']}: {PRIVATE_NETWORK_ADVICE}"
    ], staged.stderr[-2000:]


@needs_endpoint("S3_TEST_URL", "a live store (and its credentials)")
def test_live_store_lists_and_stages(tmp_path):
    """S3_TEST_URL=s3://bucket/prefix/*.tfrecord on the endpoint in AWS_ENDPOINT_URL (or AWS itself)."""
    files = local_files(os.environ["S3_TEST_URL"], cache_dir=tmp_path, progress=False)
    assert files and all(os.path.getsize(f) > 0 for f in files)


def test_refused_and_unauthorised_credentials_are_one_line(s3_env, monkeypatch):
    """With moto's IAM checks on (its own server: the switch is process-wide, so it is put back)."""
    import requests

    with s3_test_server() as url:
        upload(url, BUCKET, "hep", [])
        iam = server_client(url, "iam")
        iam.create_user(UserName="no-rights")
        key = iam.create_access_key(UserName="no-rights")["AccessKey"]
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        requests.post(f"{url}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
        try:
            for key_id, message in (
                (key["AccessKeyId"], "access denied by"),
                ("AKIAUNKNOWNKEY000000", "refused the credentials (InvalidAccessKeyId)"),
            ):
                monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
                with pytest.raises(DataError, match=re.escape(message)):
                    local_files(f"s3://{BUCKET}/hep/*.tfrecord", cache_dir=s3_env, progress=False)
        finally:
            requests.post(f"{url}/moto-api/reset-auth", data=b"inf", timeout=10).raise_for_status()
