"""The words a task uses for its samples and measures (each task holds its own Nouns); a foundation type, so that
generic code and the pages speak in them without asking which task they run."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Nouns:
    """The words every caption, column and message uses for a task's samples and measures."""

    sample: str  # "image", "object", "person"
    samples: str  # "images", "objects", "people"
    score: str  # what a sample's score is: "accuracy", "IoU", "OKS"
    measure: str  # what a repair's before and after are: "accuracy", "objects found", "people found"
    score_help: str  # one line: how a sample is scored
    explain: str  # one line: what a sample is
    ap: str = "AP"  # COCO's average precision as the task's figures name it ("mask AP" for masks)

    @property
    def a_sample(self) -> str:
        """'an image', 'an object', 'a person'."""
        return f"{'an' if self.sample[:1] in 'aeiou' else 'a'} {self.sample}"

    def count(self, n: int) -> str:
        """'1 image', '12,000 objects'."""
        return f"{n:,} {self.sample if n == 1 else self.samples}"

    @property
    def figure(self) -> str:
        """What a figure over many samples is, one name for it on every page and command: "accuracy" where a sample
        is right or wrong, else the mean of its score ("mean IoU", "mean OKS", "mean mask IoU"; 0 when missed)."""
        return self.score if self.score == self.measure else f"mean {self.score}"

    def sample_name(self, key: str) -> str:
        """A sample's key as a reader names it: an object's "a.png#object-4" is "a.png · person 4" (4: its annotation
        id), a false positive's "a.png#m-detection-7" is "a.png · m's detection 7"; an image's key is itself."""
        if "#object-" in key:
            image, number = key.rsplit("#object-", 1)
            return f"{image} · {self.sample} {number}"
        image, hashed, rest = key.rpartition("#")
        model, dash, number = rest.rpartition("-detection-")
        return f"{image} · {model}'s detection {number}" if hashed and dash and number.isdigit() else key

    @property
    def Samples(self) -> str:  # noqa: N802 (a column or metric title)
        return self.samples[:1].upper() + self.samples[1:]

