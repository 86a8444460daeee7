"""Objects from S3 or any S3-compatible store (Ceph RGW, MinIO, OCI Object Storage's S3 API), staged to
local disk for tf.data, which has no s3:// file system since TensorFlow stopped shipping one.

A pattern is `s3://bucket/prefix/*.tfrecord` (fnmatch over the key). The endpoint is `--s3-endpoint URL`
or `AWS_ENDPOINT_URL`; a custom endpoint is addressed path-style (bucket in the path, as Ceph RGW and
MinIO expect). Credentials come from boto3's usual chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a
profile (AWS_PROFILE), or an instance role; never from arguments.

Staging downloads each object once to `cache_dir/bucket/key` (several at a time, each in parallel ranges),
writes to a temporary name and renames, and records the ETag beside it: an object whose local copy has
the same size and ETag is not fetched again, so a restarted worker resumes where it stopped.

A bucket listing is hostile input: a key is a file name only when it stays inside `cache_dir/bucket` once
resolved. Absolute keys, `.`, `..` and empty segments, and segments longer than the file system allows are
refused with one line naming the key, before anything is written (train/staging.py runs the downloads
under deadlines).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnsql.text import printable

DEFAULT_CACHE = Path(os.environ.get("NNSQL_DATA_CACHE", Path.home() / ".cache" / "nnsql" / "objects"))
PARALLEL_OBJECTS = 4
BUCKET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
# room left in a name segment for the suffixes staging adds: ".part-<pid>" while downloading, ".etag"
SUFFIX_ROOM = len(".part-") + 7
# How the line that names the objects a worker staged begins (nnsql.train.data): their keys are whoever
# writes the bucket's words, never the script's, and local spawn reads no output path from that line.
STAGED_LINE = "nnsql staged "
# set to "private" in the workers of a local `nnsql spawn` run, whose network namespace has no way out
PRIVATE_NETWORK = "NNSQL_NETWORK"
PRIVATE_NETWORK_ADVICE = (
    "local workers of nnsql spawn reach no network but their own; run with --network host (their "
    "TensorFlow ports are then open to every host that can reach this machine)"
)
CREDENTIALS_ADVICE = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (nnsql spawn --env-file puts them in a "
    "Kubernetes Secret) or AWS_PROFILE"
)


class DataError(ValueError):
    """A training-data problem the user can fix, said in one line: the message is made printable, since
    it quotes bucket keys and paths whoever writes the bucket chose."""

    def __init__(self, message: str) -> None:
        super().__init__(printable(message))


@dataclass(frozen=True)
class Pattern:
    bucket: str
    key_glob: str

    @property
    def prefix(self) -> str:
        """The key up to the first wildcard: what S3 can list by."""
        return re.split(r"[*?\[]", self.key_glob, maxsplit=1)[0]

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key_glob}"


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    etag: str


def is_url(pattern: str) -> bool:
    return "://" in pattern


def parse(url: str) -> Pattern:
    scheme, _, rest = url.partition("://")
    if scheme != "s3":
        raise DataError(f"{url}: only s3:// URLs are supported (any S3-compatible endpoint: --s3-endpoint)")
    bucket, _, key_glob = rest.partition("/")
    if not bucket or not key_glob:
        raise DataError(f"{url}: expected s3://bucket/prefix/*.tfrecord")
    if not BUCKET_NAME.fullmatch(bucket):
        raise DataError(f"{url}: {bucket!r} is not a bucket name")
    return Pattern(bucket, key_glob)


def endpoint_url(endpoint: str | None) -> str | None:
    return endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def client(endpoint: str | None = None) -> Any:
    """A boto3 S3 client: path-style on a custom endpoint, short connect timeouts, a few retries."""
    import boto3
    from botocore.config import Config

    url = endpoint_url(endpoint)
    config = Config(
        connect_timeout=5,
        read_timeout=60,
        retries={"max_attempts": 3, "mode": "standard"},
        s3={"addressing_style": "path" if url else "auto"},
    )
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    # a session of its own: boto3's default one keeps the credentials it first found for the process
    return boto3.session.Session().client("s3", endpoint_url=url, region_name=region, config=config)


def explain(error: Exception, where: str, endpoint: str | None) -> DataError:
    """One line for what went wrong talking to the store, and what to do about it."""
    from botocore import exceptions

    place = endpoint_url(endpoint) or "AWS S3"
    if isinstance(error, exceptions.NoCredentialsError | exceptions.PartialCredentialsError):
        return DataError(f"no S3 credentials for {where}: {CREDENTIALS_ADVICE}")
    if isinstance(error, exceptions.EndpointConnectionError | exceptions.ConnectTimeoutError):
        if os.environ.get(PRIVATE_NETWORK) == "private":
            return DataError(f"cannot reach the S3 endpoint {place}: {PRIVATE_NETWORK_ADVICE}")
        return DataError(f"cannot reach the S3 endpoint {place}: check --s3-endpoint or AWS_ENDPOINT_URL")
    if isinstance(error, exceptions.ClientError):
        code = str(error.response.get("Error", {}).get("Code", "unknown"))
        if code == "NoSuchBucket":
            return DataError(f"{where}: bucket does not exist at {place}")
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch"):
            return DataError(f"{where}: {place} refused the credentials ({code}): {CREDENTIALS_ADVICE}")
        if code in ("AccessDenied", "403", "AllAccessDisabled"):
            return DataError(f"{where}: access denied by {place} (the credentials need list and read rights)")
        return DataError(f"{where}: S3 error {code} from {place}")
    return DataError(f"{where}: {type(error).__name__} talking to {place}")


def list_matching(s3: Any, pattern: Pattern, endpoint: str | None = None) -> list[StoredObject]:
    """The objects whose keys match the pattern, sorted by key; an error if there are none."""
    from botocore.exceptions import BotoCoreError, ClientError

    found, listed = [], 0
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=pattern.bucket, Prefix=pattern.prefix)
        for page in pages:
            for item in page.get("Contents", []):
                listed += 1
                if fnmatch.fnmatchcase(item["Key"], pattern.key_glob):
                    found.append(StoredObject(item["Key"], int(item["Size"]), item["ETag"].strip('"')))
    except (BotoCoreError, ClientError) as error:
        raise explain(error, str(pattern), endpoint) from None
    if not found:
        raise DataError(
            f"{pattern} matches no object ({listed} objects under s3://{pattern.bucket}/{pattern.prefix})"
        )
    return sorted(found, key=lambda stored: stored.key)


def name_max(directory: Path) -> int:
    """The longest file name (bytes) the file system holding `directory` (or its nearest ancestor) takes."""
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            try:
                return os.pathconf(candidate, "PC_NAME_MAX")
            except (OSError, ValueError):
                break
    return 255


def local_path(cache_dir: Path, bucket: str, stored: StoredObject) -> Path:
    """`cache_dir/bucket/key`, or DataError when the key would name a file outside it (or none at all)."""
    where = f"s3://{bucket}/{stored.key}"
    if not BUCKET_NAME.fullmatch(bucket):
        raise DataError(f"{where}: refused: {bucket!r} is not a bucket name")
    if stored.key.startswith("/"):
        raise DataError(f"{where}: refused: an absolute key would be written outside the cache {cache_dir}")
    segments = stored.key.split("/")
    if any(segment in ("", ".", "..") for segment in segments) or "\0" in stored.key:
        raise DataError(
            f"{where}: refused: a key with '..', '.' or empty segments could name a file outside the "
            f"cache {cache_dir}"
        )
    root = (cache_dir / bucket).resolve()
    longest = name_max(root) - SUFFIX_ROOM
    if any(len(segment.encode()) > longest for segment in segments):
        raise DataError(
            f"{where}: refused: a segment of the key is longer than the {longest} bytes a file name "
            "can have here"
        )
    path = root.joinpath(*segments)
    if not path.resolve().is_relative_to(root):
        raise DataError(f"{where}: refused: {path} leads outside the cache {cache_dir} (a link)")
    return path


def is_staged(path: Path, stored: StoredObject) -> bool:
    etag = path.with_name(path.name + ".etag")
    return (
        path.exists()
        and path.stat().st_size == stored.size
        and etag.exists()
        and etag.read_text() == stored.etag
    )


def download(s3: Any, bucket: str, stored: StoredObject, path: Path, endpoint: str | None) -> None:
    """Fetch one object under a temporary name, check its size, then rename it into place."""
    from botocore.exceptions import BotoCoreError, ClientError

    where = f"s3://{bucket}/{stored.key}"
    partial = path.with_name(f"{path.name}.part-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, stored.key, str(partial))
        if partial.stat().st_size != stored.size:
            raise DataError(f"{where}: downloaded size differs from the listing; retry")
        os.replace(partial, path)
        path.with_name(path.name + ".etag").write_text(stored.etag)
    except (BotoCoreError, ClientError) as error:
        raise explain(error, where, endpoint) from None
    except OSError as error:  # a key that is a file and a folder at once, a full disk, no permission
        raise DataError(f"{where}: cannot write {path}: {error.strerror or error}") from None
    finally:
        partial.unlink(missing_ok=True)


def stage(
    s3: Any,
    bucket: str,
    objects: list[StoredObject],
    cache_dir: Path,
    endpoint: str | None = None,
    *,
    progress: bool = True,
    on_start: Callable[[StoredObject, Path], None] | None = None,
    on_done: Callable[[StoredObject], None] | None = None,
) -> tuple[list[Path], int]:
    """Local copies of `objects`, fetching those not staged yet; returns (paths, objects downloaded).
    Every destination is checked before the first download; `on_start` and `on_done` are told as each
    object's download begins and ends (train/staging.py keeps its deadlines with them)."""
    from tqdm import tqdm

    paths = [local_path(cache_dir, bucket, stored) for stored in objects]
    missing = [(s, p) for s, p in zip(objects, paths, strict=True) if not is_staged(p, s)]
    total = sum(stored.size for stored, _ in missing)

    def fetch(stored: StoredObject, path: Path) -> None:
        if on_start:
            on_start(stored, path)
        download(s3, bucket, stored, path, endpoint)
        if on_done:
            on_done(stored)

    with (
        tqdm(
            total=total, unit="B", unit_scale=True, desc="staging", disable=not progress or not missing
        ) as bar,
        ThreadPoolExecutor(PARALLEL_OBJECTS) as pool,
    ):
        futures = {pool.submit(fetch, s, p): s for s, p in missing}
        try:
            for future in futures:
                future.result()
                bar.update(futures[future].size)
        except BaseException:
            for future in futures:  # the first failure ends the staging: start no other download
                future.cancel()
            raise
    return paths, len(missing)
