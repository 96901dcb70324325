"""What a tf.data pipeline's stages say, read the same way by the measured process and the
diagnoses: ``caches_after_map`` (a map whose result a cache after it keeps),
``shuffles_after_map`` (a shuffle buffer that refills through a map each epoch) and
``repeats_data`` (the whole data set repeated)."""

from __future__ import annotations

from collections.abc import Sequence

#: A fit of at least this many epochs whose pipeline caches after a map warms up through its
#: first epoch (the cache fills there; ``profiler.capture.script.schedule``), and its first
#: epoch's excess is named (``profiler.diagnoses.input``'s ``cache_fill``).
CACHE_EPOCHS = 3


#: The Keras utilities that build a dataset with a map of their own, by the module of that
#: map's function: the script caches the dataset they return, and the recorder reads one
#: element of such a map where its spec leaves the size unknown (its windows or images are
#: cheap to make; a Keras array adapter's map sits behind a shuffle of the whole data set:
#: reading one element of the VAE example's took 28 s).
KERAS_MAKERS = {
    "timeseries_dataset_utils.py": "keras.utils.timeseries_dataset_from_array",
    "image_dataset_utils.py": "keras.utils.image_dataset_from_directory",
    "text_dataset_utils.py": "keras.utils.text_dataset_from_directory",
    "audio_dataset_utils.py": "keras.utils.audio_dataset_from_directory",
}


def caches_after_map(kinds: Sequence[str]) -> bool:
    """Whether the stages (source first) hold a map before their last ``cache``."""
    if "cache" not in kinds:
        return False
    last = len(kinds) - 1 - list(kinds)[::-1].index("cache")
    return "map" in kinds[:last]


def shuffles_after_map(kinds: Sequence[str]) -> tuple[int, int] | None:
    """(the map's index, the shuffle's) of the first shuffle after a map with no cache between
    them (its buffer refills through the map at each epoch's start), else None."""
    for i, kind in enumerate(kinds):
        if kind != "shuffle" or "map" not in kinds[:i]:
            continue
        last_map = max(j for j in range(i) if kinds[j] == "map")
        if "cache" not in kinds[last_map:i]:
            return last_map, i
    return None


def repeats_data(kinds: Sequence[str]) -> bool:
    """Whether the stages repeat the whole data set: a repeat that no zip follows
    (``timeseries_dataset_from_array`` repeats its source tensor, then zips it with the
    window indices)."""
    return any(k == "repeat" and "zip" not in kinds[i + 1 :] for i, k in enumerate(kinds))
