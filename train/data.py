"""TFRecords for a training script, from local files or object storage, sharded among the workers.

    from nnsql.train.data import tfrecords
    records = tfrecords("s3://physics/hep/*.tfrecord")            # this worker's shard, as a Dataset
    events = records.map(parse).cache().shuffle(4096).batch(128)

A local glob and an `s3://` pattern (train/objectstore.py: any S3-compatible endpoint) behave alike.
Each worker of a multi-worker job (TF_CONFIG) takes its own shard:
- `shard="file"` (default): worker i of n reads files i, i+n, i+2n, ... of the sorted list; from object
  storage it downloads only those. Needs at least as many files as workers.
- `shard="data"`: every worker reads every file and keeps every n-th record (for fewer files than workers).
The dataset is marked as sharded already, so tf.distribute does not shard it again.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any, TypeVar

from nnsql.text import printable

from . import objectstore, staging
from .distributed import worker_count, worker_index

READ_BUFFER = 16 * 1024 * 1024  # bytes per TFRecord reader: large sequential reads
SHARD_POLICIES = ("file", "data")
T = TypeVar("T")


def shard_files(files: list[T], pattern: str, shard: str) -> list[T]:
    """This worker's part of the sorted file list under the shard policy."""
    workers, index = worker_count(), worker_index()
    if shard not in SHARD_POLICIES:
        raise objectstore.DataError(f"unknown shard policy {shard!r}: use one of {', '.join(SHARD_POLICIES)}")
    if shard == "data":
        return files
    if len(files) < workers:
        raise objectstore.DataError(
            f"{pattern} matches {len(files)} file(s) for {workers} workers: write at least {workers} files, "
            "or shard by record (shard='data', --shard data)"
        )
    return files[index::workers]


def local_files(
    pattern: str,
    *,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
    shard: str = "file",
    progress: bool = True,
    object_deadline: float | None = None,
    staging_deadline: float | None = None,
) -> list[str]:
    """This worker's files as local paths: from object storage, only this worker's shard is staged, within
    the deadlines of train/staging.py (seconds; default NNSQL_OBJECT_DEADLINE / NNSQL_STAGING_DEADLINE,
    else 900 s per object and 7200 s in all)."""
    if not objectstore.is_url(pattern):
        files = sorted(glob.glob(pattern))
        if not files:
            raise objectstore.DataError(f"{pattern} matches no file")
        return shard_files(files, pattern, shard)
    cache = cache_dir or objectstore.DEFAULT_CACHE
    objectstore.parse(pattern)  # a malformed URL is refused here, before any process starts
    staged = staging.fetch(
        pattern,
        endpoint=endpoint,
        cache_dir=cache,
        shard=shard,
        progress=progress,
        object_deadline=object_deadline,
        staging_deadline=staging_deadline,
    )
    objects, paths, fetched = staged.objects, staged.paths, staged.fetched
    megabytes = sum(stored.size for stored in objects) / 1e6
    print(
        f"{objectstore.STAGED_LINE}for worker {worker_index()}/{worker_count()}: {len(objects)} objects "
        f"({megabytes:.1f} MB) of "
        f"{pattern}, {fetched} downloaded, {len(objects) - fetched} already staged in {cache}: "
        + " ".join(printable(stored.key) for stored in objects),
        flush=True,
    )
    return [str(path) for path in paths]


def tfrecords(
    pattern: str,
    *,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
    shard: str = "file",
    shuffle_files: bool = False,
    seed: int = 0,
    progress: bool = True,
    object_deadline: float | None = None,
    staging_deadline: float | None = None,
) -> Any:
    """A `tf.data.Dataset` of this worker's serialized records, read in parallel with large buffers."""
    files = local_files(
        pattern,
        endpoint=endpoint,
        cache_dir=cache_dir,
        shard=shard,
        progress=progress,
        object_deadline=object_deadline,
        staging_deadline=staging_deadline,
    )
    return read_records(files, shard=shard, shuffle_files=shuffle_files, seed=seed)


def read_records(files: list[str], *, shard: str = "file", shuffle_files: bool = False, seed: int = 0) -> Any:
    """The records of local files already chosen by `local_files` (stage them before creating a
    tf.distribute strategy, which must come before any other TensorFlow operation)."""
    import tensorflow as tf

    names = tf.data.Dataset.from_tensor_slices(files)
    if shuffle_files:
        names = names.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    records = names.interleave(
        lambda path: tf.data.TFRecordDataset(path, buffer_size=READ_BUFFER),
        cycle_length=tf.data.AUTOTUNE,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=shard == "data",  # every worker must see one order to keep disjoint records
    )
    if shard == "data" and worker_count() > 1:
        records = records.shard(worker_count(), worker_index())
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return records.with_options(options)
