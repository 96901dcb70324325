"""Secrets are not recorded: ``--api-key sk-...`` becomes ``--api-key <redacted>`` in the
summary, the report and every file of the run, and so does a secret in text the script wrote
(its exception's message, its traceback): ``redact_text``.

Place in the pipeline: wherever a script's arguments are written (its spec's title, the
script's record, the worker spec kept in the run folder); the script itself gets them as
given. A value is redacted when the option it belongs to names a secret (``SECRET_NAMES``:
key, token, secret, password, credential, auth ...) or when it looks like a token itself
(``TOKEN``: a known key prefix, or a long run of letters and digits mixing both).

In text (``redact_text``): every value known to be secret (the values ``redact_argv`` redacts
in the script's arguments, and the values of environment variables whose names say they hold a
secret, ``OPENAI_API_KEY``, ``HF_TOKEN`` ...: ``known_secrets``) and every word shaped like a
known token (``TOKEN_IN_TEXT``: the prefixes above) becomes ``<redacted>``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence

REDACTED = "<redacted>"
#: Option names that hold a secret (``--api-key``, ``--hf_token``, ``--db-password``).
SECRET_NAMES = re.compile(
    r"key|token|secret|passw(or)?d|pwd|credential|auth|cookie|session[-_]?id", re.IGNORECASE
)
#: Values that look like a token on their own: a known prefix, 32+ characters mixing upper-
#: and lower-case letters and digits, or 40+ hex digits (a run name such as
#: ``resnet50_imagenet_run1`` is none of these).
TOKEN = re.compile(
    r"^(sk-|sk_|ghp_|gho_|github_pat_|xox[abpr]-|AKIA|ASIA|hf_|glpat-|AIza)[\w-]{8,}$"
    r"|^(?=[\w+/=-]*\d)(?=[\w+/=-]*[a-z])(?=[\w+/=-]*[A-Z])[\w+/=-]{32,}$"
    r"|^[0-9a-fA-F]{40,}$"
)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the values of secret-named options and token-like values redacted."""
    out: list[str] = []
    secret_next = False
    for arg in argv:
        if secret_next and not arg.startswith("-"):
            out.append(REDACTED)
            secret_next = False
            continue
        secret_next = False
        if arg.startswith("-"):
            name, eq, value = arg.partition("=")
            if SECRET_NAMES.search(name.lstrip("-")):
                if eq:
                    out.append(f"{name}={REDACTED}")
                else:
                    out.append(arg)
                    secret_next = True
                continue
            if eq and TOKEN.match(value):
                out.append(f"{name}={REDACTED}")
                continue
            out.append(arg)
            continue
        key, eq, value = arg.partition("=")
        if eq and SECRET_NAMES.search(key):  # key=value arguments (hydra, fire)
            out.append(f"{key}={REDACTED}")
        elif TOKEN.match(arg):
            out.append(REDACTED)
        else:
            out.append(arg)
    return out


#: Words in text shaped like a known token (a key prefix and at least 8 more characters).
TOKEN_IN_TEXT = re.compile(
    r"(?<![\w-])(sk-|sk_|ghp_|gho_|github_pat_|xox[abpr]-|AKIA|ASIA|hf_|glpat-|AIza)[\w-]{8,}"
)
#: A known secret shorter than this is not searched for in text (it would match words).
MIN_SECRET_CHARS = 6


def known_secrets(
    argv: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The values ``argv`` holds that ``redact_argv`` redacts, and the values of the
    environment's variables whose names say they hold a secret; longest first."""
    env = os.environ if environ is None else environ
    found = {v for k, v in env.items() if SECRET_NAMES.search(k)}
    for arg, kept in zip(argv, redact_argv(argv), strict=True):
        if arg != kept:
            # ``--key=VALUE`` and ``key=VALUE`` keep their name: the value is the secret.
            found.add(arg.partition("=")[2] if kept.endswith("=" + REDACTED) else arg)
    return tuple(sorted((v for v in found if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` and every token-shaped word as ``<redacted>``."""
    for value in secrets:
        if value and value in text:
            text = text.replace(value, REDACTED)
    return TOKEN_IN_TEXT.sub(REDACTED, text)
