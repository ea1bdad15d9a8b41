"""What the parts of the dataset maker share: its error, class names, seed tags, and
the samples of a tar shard."""

from typing import NamedTuple

# Seed-sequence tags keep the streams of images, plan and hazards apart.
TAG_IMAGE, TAG_PLAN, TAG_HAZARD, TAG_DECODE_FAILURE = 0, 1, 2, 3


class DatasetError(Exception):
    """A runtime failure with a message meant for the user."""


def class_name(c: int) -> str:
    return 'n%08d' % c


class ShardSample(NamedTuple):
    """One sample of a tar shard: members KEY.jpg and, unless label is None, the label."""
    key: str
    image: bytes
    label: int | None


class Shard(NamedTuple):
    samples: list[ShardSample]
    cut: str | None = None       # the key whose image the tar is cut in the middle of
