"""Youzan's dispatch tags and ext filters: which subscriber of a channel a PUB_EXT message goes to, and which it skips.

Both read the message's JSON ext header (what PUB_EXT sent, kept as NSQ_EXT_HEADER).

Tags: a message whose header has "##client_dispatch_tag": T goes to the channel's subscribers that IDENTIFY'd with
desired_tag T while there is one (it waits for their RDY room, as Youzan's nsqd blocks on the tag's queue); with no
such subscriber, and for messages without a tag, any subscriber takes it.

Ext filters: IDENTIFY's ext_filter {"type", "inverse", "filter_ext_key", "filter_data", "filter_data_list"}:
  type 1: the header's string value at filter_ext_key equals filter_data (an empty filter_data matches anything)
  type 2: a regex (searched in the value, as Go's MatchString); type 3: a glob (* ? [..])
  type 4: filter_data_list [{"filter_ext_key", "filter_data"}, ...] of exact matches, all of which must match when
          filter_ext_key is "all", any of them when it is "any"
A message without a JSON header never matches; "inverse" flips the result. A message the filter refuses is
finished for the whole channel without being sent (Youzan's nsqd confirms it: the channel moves on).
A filter Youzan's nsqd cannot build is ignored there with a log line; here IDENTIFY fails with E_BAD_BODY, which
says what is wrong.
"""
from __future__ import annotations

import fnmatch
import json
import re
from typing import Any, Callable

DISPATCH_TAG_KEY = "##client_dispatch_tag"
MAX_TAG_LEN = 100          # Youzan's ext.MAX_TAG_LEN

Filter = Callable[[Any], bool]          # given the message's parsed JSON header (None: it has none)


class FilterError(ValueError):
    """An ext_filter that cannot be used; the text says why."""


def parse_header(ext: bytes) -> Any:
    """A message's JSON ext header as an object, or None when it has none or it is not a JSON object."""
    if not ext:
        return None
    try:
        header = json.loads(ext)
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def message_tag(header: Any) -> str:
    tag = header.get(DISPATCH_TAG_KEY) if header is not None else None
    return tag if isinstance(tag, str) else ""


def _string_at(header: Any, key: str) -> str:
    value = header.get(key)
    return value if isinstance(value, str) else ""


def _exact(key: str, wanted: str) -> Filter:
    return lambda header: header is not None and (not wanted or header.get(key) == wanted)


def build_filter(spec: Any) -> Filter | None:
    """IDENTIFY's ext_filter as a predicate (None for no filter: absent or type 0)."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise FilterError("ext_filter must be a JSON object")
    kind = spec.get("type") or 0
    if kind == 0:
        return None
    key, data = spec.get("filter_ext_key") or "", spec.get("filter_data") or ""
    if not isinstance(key, str) or not isinstance(data, str) or not key or (not data and kind != 4):
        raise FilterError("ext_filter needs a filter_ext_key and a filter_data (strings)")
    if kind == 1:
        match = _exact(key, data)
    elif kind == 2:
        try:
            pattern = re.compile(data)
        except re.error as exc:
            raise FilterError(f"ext_filter regex {data!r}: {exc}") from None
        match = lambda header: header is not None and bool(pattern.search(_string_at(header, key)))  # noqa: E731
    elif kind == 3:
        glob = re.compile(fnmatch.translate(data))
        match = lambda header: header is not None and bool(glob.match(_string_at(header, key)))  # noqa: E731
    elif kind == 4:
        match = _multi(key, spec.get("filter_data_list"))
    else:
        raise FilterError(f"ext_filter type {kind!r} is not supported (1 exact, 2 regex, 3 glob, 4 multi)")
    if spec.get("inverse"):
        return lambda header: not match(header)
    return match


def _multi(relation: str, entries: Any) -> Filter:
    if relation not in ("all", "any"):
        raise FilterError(f"ext_filter type 4 wants filter_ext_key 'all' or 'any', not {relation!r}")
    if not isinstance(entries, list) or not entries:
        raise FilterError("ext_filter type 4 needs a filter_data_list")
    matches = []
    for entry in entries:
        key = entry.get("filter_ext_key") if isinstance(entry, dict) else None
        data = entry.get("filter_data") if isinstance(entry, dict) else None
        if not isinstance(key, str) or not isinstance(data, str) or not key or not data:
            raise FilterError(f"ext_filter list entry {entry!r} needs a filter_ext_key and a filter_data")
        matches.append(_exact(key, data))
    combine = all if relation == "all" else any
    return lambda header: combine(match(header) for match in matches)
