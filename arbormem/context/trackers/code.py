"""The code mode's tracker: the task, its progress, files touched and recent errors."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from arbormem.context.trackers.base import Said, Tracker, clip
from arbormem.context.trackers.common import (
    CONDITIONAL,
    NEGATED,
    URL,
    asserted,
    bullets,
    json_list,
    json_object,
    json_string,
    json_strings,
    norm,
    prose,
    remember,
    saved_texts,
    sentences,
    tidy,
    words,
)

_EXTENSIONS = words(
    """
py pyi pyx ipynb js jsx mjs cjs ts tsx mts cts json jsonc yaml yml toml ini cfg conf md rst
txt c h cc cpp cxx hpp hh hxx rs go java kt kts scala swift rb php cs fs vb sh bash zsh fish
ps1 bat cmd sql html htm css scss sass less vue svelte xml csv tsv lock gradle dart lua pl
pm ex exs erl hrl hs ml clj cljs el vim tf tfvars proto graphql gql cmake mk sol zig nim jl
tex svg plist csproj sln env cfg properties dockerfile
    """
)
_EXT = "|".join(sorted(_EXTENSIONS, key=len, reverse=True))
_SPECIAL_FILES = (
    r"Makefile|Dockerfile|Containerfile|Gemfile|Rakefile|Procfile|Jenkinsfile|Vagrantfile|"
    r"Justfile|Pipfile|Brewfile|CODEOWNERS"
)
_DOTFILES = (
    r"\.(?:gitignore|gitattributes|gitmodules|dockerignore|env(?:\.[\w-]+)?|npmrc|nvmrc|"
    r"editorconfig|bashrc|zshrc|eslintrc(?:\.\w+)?|prettierrc(?:\.\w+)?|babelrc|pylintrc|"
    r"flake8|coveragerc)"
)
_FILE = re.compile(
    r"(?<![\w.:/\\~@$-])("
    r"(?:[A-Za-z]:)?[\\/]?(?:[\w.@+-]+[\\/])+[\w@+-][\w.@+-]*\.[A-Za-z][A-Za-z0-9]{0,9}"
    r"|~[\\/](?:[\w.@+-]+[\\/])*[\w@+-][\w.@+-]*\.[A-Za-z][A-Za-z0-9]{0,9}"
    rf"|[\w@+-][\w.@+-]*\.(?:{_EXT})"
    rf"|{_SPECIAL_FILES}|{_DOTFILES}"
    r")(?![\w/\\@(-]|\.[A-Za-z0-9])"
)
# "Node.js" is a runtime, not a file; nor are the other well-known "X.js" libraries.
_JS_LIBRARIES = words(
    """
node vue next nuxt express react three d3 chart ember backbone angular socket p5 alpine
solid preact moment anime paper fabric pixi phaser babylon ml5 tensorflow
    """
)
_NOT_FILE_STEMS = frozenset({"self", "this", "cls"})
_LIBRARY_PATH = re.compile(
    r"site-packages|dist-packages|node_modules|[\\/]lib[\\/]python\d|^<|^node:|"
    r"^internal[\\/]|[\\/]usr[\\/]lib[\\/]|[\\/]\.?venv[\\/]",
    re.I,
)
_PATHLIKE = r"(?:[A-Za-z]:)?[^\s:()\"'<>,]*[\w-]\.[A-Za-z][A-Za-z0-9]{0,9}"


def _basename(path: str) -> str:
    return re.split(r"[\\/]", path)[-1]


def _is_bare(path: str) -> bool:
    return "/" not in path and "\\" not in path


def _clean_path(path: str) -> str:
    return re.sub(r"^\.[\\/]", "", path.strip())


def _project_file(path: str | None) -> bool:
    return bool(path) and not _LIBRARY_PATH.search(path or "")


def _files(text: str) -> list[str]:
    """File paths and names mentioned in ``text``, in order of mention."""
    out = []
    for m in _FILE.finditer(URL.sub(" ", text).replace("`", " ")):
        path = _clean_path(m.group(1))
        stem, _, ext = _basename(path).rpartition(".")
        if _is_bare(path) and (
            (ext.lower() == "js" and stem.lower() in _JS_LIBRARIES) or stem in _NOT_FILE_STEMS
        ):
            continue
        if _project_file(path):
            out.append(path)
    return out


@dataclass(frozen=True)
class CodeError:
    """An error seen in the session, with where it happened when known."""

    type: str
    message: str = ""
    file: str | None = None
    line: int | None = None

    def describe(self) -> str:
        where = ""
        if self.file:
            where = f" at {self.file}:{self.line}" if self.line else f" in {self.file}"
        elif self.line:
            where = f" at line {self.line}"
        return f"{self.type}{where}: {self.message}" if self.message else f"{self.type}{where}"


def _same_error(a: CodeError, b: CodeError) -> bool:
    if a.type != b.type:
        return False
    if a.message and b.message and clip(a.message, 80) != clip(b.message, 80):
        return False
    if a.file and b.file and _basename(a.file) != _basename(b.file):
        return False
    return not (a.line and b.line and a.line != b.line)


def _combine(new: CodeError, old: CodeError) -> CodeError:
    return CodeError(
        new.type, new.message or old.message, new.file or old.file, new.line or old.line
    )


_EXC = r"(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*"
_TB_HEAD = re.compile(r"^[ \t]*Traceback \(most recent call last\):[ \t]*$", re.M)
_PY_FRAME = re.compile(r'^[ \t]*File "([^"\n]+)", line (\d+)', re.M)
_EXC_LINE = re.compile(rf"^\s*({_EXC})(?::[ \t]*(.*?))?\s*$")
_EXC_SUFFIX = re.compile(
    r"(?:Error|Exception|Warning|Exit|Interrupt|Fault|Failure|Timeout|Cancelled|Iteration)$"
)
_PYTEST_LOC = re.compile(rf"^({_PATHLIKE}):(\d+): ([A-Z]\w*(?:Error|Exception))\s*$", re.M)
_DIAG = re.compile(
    rf"^[ \t]*({_PATHLIKE}):(\d+)(?::(\d+))?:[ \t]+"
    r"(?:((?:fatal[ \t]+)?error)(?:\[[\w-]+\])?:[ \t]*)?(\S.*?)[ \t]*$",
    re.M,
)
_RUST = re.compile(rf"^(error(?:\[E\d+\])?): (.+)\n[ \t]*--> ({_PATHLIKE}):(\d+)(?::\d+)?", re.M)
_TSC = re.compile(
    rf"^[ \t]*({_PATHLIKE})(?:\((\d+),\d+\):|:(\d+):\d+ -) error (TS\d+): (.+?)[ \t]*$", re.M
)
_AT_FRAME = re.compile(rf"^\s*at\s+(?:[^()\n]*\()?({_PATHLIKE}):(\d+)(?::\d+)?\)?\s*$")
_THROWN = re.compile(
    r"^\s*(?:Uncaught\s+|Exception in thread \"[^\"]*\"\s+|Caused by:\s+)?"
    rf"({_EXC}(?:Error|Exception))(?::\s*(.*?))?\s*$"
)
_INLINE_ERROR = re.compile(rf"(?<![\w.])({_EXC}(?:Error|Exception)):[ \t]+(\S[^\n]*)")
_MENTIONED_ERROR = re.compile(
    r"(?i:\b(?:getting|get|got|seeing|see|hit|hitting|"
    r"(?:fails|failing|failed|crashes|crashing|crashed|dies|died)\s+with))\s+"
    r"(?i:(?:an?|the|this|that|same)\s+)*"
    rf"({_EXC}(?:Error|Exception))\b"
)
_LOCATED = re.compile(rf"({_PATHLIKE})(?::(\d+)|,?\s+(?:on\s+|at\s+)?line\s+(\d+))")
_IN_FILE = re.compile(rf"\bin\s+({_PATHLIKE})\b")


def _short_type(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _location(
    frames: Sequence[tuple[str, str]], innermost_last: bool
) -> tuple[str | None, int | None]:
    """The frame to report: the innermost one in the project's own files."""
    ordered = list(reversed(frames)) if innermost_last else list(frames)
    for path, line in ordered:
        if _project_file(path):
            return _clean_path(path), int(line)
    return None, None


def _python_errors(text: str) -> list[tuple[int, CodeError]]:
    out = []
    bounds = [0, *(m.end() for m in _TB_HEAD.finditer(text)), len(text)]
    for start, end in itertools.pairwise(bounds):
        block = text[start:end]
        frames = list(_PY_FRAME.finditer(block))
        if not frames:
            continue
        for line in block[frames[-1].end() :].splitlines()[1:12]:
            m = _EXC_LINE.match(line)
            if m and (_EXC_SUFFIX.search(m.group(1)) or "." in m.group(1)):
                file, lineno = _location([(f.group(1), f.group(2)) for f in frames], True)
                error = CodeError(
                    _short_type(m.group(1)), clip(m.group(2) or "", 200), file, lineno
                )
                out.append((start + frames[-1].start(), error))
                break
    return out


def _stack_errors(text: str) -> list[tuple[int, CodeError]]:
    """JavaScript and Java style: an ``XError: message`` line followed by ``at ...`` frames."""
    out = []
    lines = text.splitlines(keepends=True)
    offset = 0
    for i, line in enumerate(lines):
        m = _THROWN.match(line)
        if m:
            frames = []
            for follow in lines[i + 1 : i + 40]:
                frame = _AT_FRAME.match(follow)
                if frame:
                    frames.append((frame.group(1), frame.group(2)))
                elif follow.strip() and not follow.strip().startswith("..."):
                    break
            if frames:
                file, lineno = _location(frames, False)
                error = CodeError(
                    _short_type(m.group(1)), clip(m.group(2) or "", 200), file, lineno
                )
                out.append((offset, error))
        offset += len(line)
    return out


def _tool_errors(text: str) -> list[tuple[int, CodeError]]:
    """Compilers, type checkers, linters and pytest's summary lines."""
    out = []
    for m in _DIAG.finditer(text):
        keyword, message = m.group(4), m.group(5)
        if not keyword and (
            not m.group(3) or re.match(r"(?i)(warning|note|info|hint|help)\b", message)
        ):
            continue
        path = _clean_path(m.group(1))
        out.append((m.start(), CodeError("error", clip(message, 200), path, int(m.group(2)))))
    for m in _RUST.finditer(text):
        path = _clean_path(m.group(3))
        out.append((m.start(), CodeError(m.group(1), clip(m.group(2), 200), path, int(m.group(4)))))
    for m in _TSC.finditer(text):
        line = int(m.group(2) or m.group(3))
        out.append(
            (m.start(), CodeError(m.group(4), clip(m.group(5), 200), _clean_path(m.group(1)), line))
        )
    for m in _PYTEST_LOC.finditer(text):
        detail = re.search(rf"^E\s+(?:[\w.]+\.)?{m.group(3)}: (.*)$", text, re.M)
        message = clip(detail.group(1), 200) if detail else ""
        out.append(
            (m.start(), CodeError(m.group(3), message, _clean_path(m.group(1)), int(m.group(2))))
        )
    return out


def _inline_errors(text: str, role: str) -> list[tuple[int, CodeError]]:
    """``TypeError: ...`` lines, and "I'm getting a KeyError in app.py" from the user."""
    out = []
    offset = 0
    for line in text.splitlines(keepends=True):
        for m in _INLINE_ERROR.finditer(line):
            at_start = not line[: m.start()].strip()
            if not at_start and role not in ("user", "tool"):
                continue  # an assistant explaining an error has not hit it
            out.append((offset + m.start(), _located(m.group(1), clip(m.group(2), 200), line)))
        if role == "user":
            for m in _MENTIONED_ERROR.finditer(line):
                if not NEGATED.search(line[max(0, m.start() - 25) : m.start()]):
                    out.append((offset + m.start(), _located(m.group(1), "", line)))
        offset += len(line)
    return out


def _located(name: str, message: str, line: str) -> CodeError:
    loc = _LOCATED.search(line)
    if loc:
        return CodeError(
            _short_type(name), message, _clean_path(loc.group(1)), int(loc.group(2) or loc.group(3))
        )
    inside = _IN_FILE.search(line)
    file = _clean_path(inside.group(1)) if inside and _project_file(inside.group(1)) else None
    return CodeError(_short_type(name), message, file)


def _errors(text: str, role: str) -> list[CodeError]:
    """Errors in one message, most recent (last in the text) first, duplicates merged."""
    found = _python_errors(text) + _stack_errors(text) + _tool_errors(text)
    structured = len(found)
    found += _inline_errors(text, role)
    kept: list[tuple[int, CodeError]] = []
    for i, (pos, error) in enumerate(found):
        twin = next((j for j, (_, k) in enumerate(kept) if _same_error(error, k)), None)
        if twin is None:
            kept.append((pos, error))
        elif i < structured or not kept[twin][1].file:
            kept[twin] = (max(pos, kept[twin][0]), _combine(kept[twin][1], error))
    kept.sort(key=lambda pe: pe[0], reverse=True)
    return [error for _, error in kept]


# Verbs that open a request. Those that are also common nouns ("Build failed", "Test
# passes now") count at the start of a sentence only when an object follows.
_TASK_VERB = (
    r"(?:fix|implement|add|write|create|refactor|debug|remove|delete|rename|migrate|"
    r"optimi[sz]e|convert|replace|extract|clean up|rewrite|integrate|speed up|set up|configure)\b"
)
_AMBIGUOUS_VERB = r"(?:build|test|change|update|port|document|split|move|install|upgrade|make)\b"
_OBJECT_AHEAD = (
    r"(?=\s+(?:the|a|an|this|that|these|those|it|them|my|our|your|its|some|all|any|every|"
    r"each|another|more|sure|\S+\.[A-Za-z]\w*)\b)"
)
_ANY_VERB = rf"(?:{_TASK_VERB}|{_AMBIGUOUS_VERB}(?! sense))"
_TASK_PATTERNS = [
    # imperative: "Fix the bug in auth.py", "Okay, now add tests for it"
    re.compile(
        r"^(?:(?:ok(?:ay)?|so|now|next|also|then|and|alright|right|great|thanks)[,!.]?\s+)*"
        rf"(?:please\s+)?(?P<t>(?:{_TASK_VERB}|{_AMBIGUOUS_VERB}{_OBJECT_AHEAD})(?!\s*:).+)",
        re.I,
    ),
    # a question that is a request: "Can you add rate limiting to the login?"
    re.compile(
        r"\b(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:help\s+(?:me\s+)?(?:to\s+)?)?"
        rf"(?P<t>{_ANY_VERB}.+)",
        re.I,
    ),
    re.compile(
        r"\b(?:I|we)(?:'d|’d| would)?\s+(?:need|want|like)\s+(?:you\s+)?to\s+"
        rf"(?P<t>{_ANY_VERB}.+)",
        re.I,
    ),
    re.compile(rf"\b(?:help\s+me|let'?s|let’s)\s+(?:to\s+)?(?P<t>{_ANY_VERB}.+)", re.I),
    re.compile(r"\b(?:the|my|our|your)\s+task\s+is\s+(?:to\s+)?(?P<t>.{6,})", re.I),
    re.compile(r"^(?:task|todo)\s*:\s*(?P<t>.{6,})", re.I),
]
_DONT = re.compile(r"^(?:please\s+)?(?:don'?t|don’t|do not|never|no need to|stop)\b", re.I)
_DONE_VERB = (
    r"(?:fixed|added|modified|updated|changed|implemented|created|removed|deleted|refactored|"
    r"renamed|moved|wrote|rewrote|replaced|extracted|tested|installed|upgraded|migrated|"
    r"configured|resolved|cleaned up|set up|patched|converted|merged|committed|pushed|deployed|"
    r"documented|reverted|bumped)"
)
_PROGRESS_PATTERNS = [
    re.compile(
        r"^(?:(?:ok(?:ay)?|done|great|alright|so|good news)[,!.:]?\s+)?(?:I|we)(?:'ve|’ve| have)?\s+"
        rf"(?:(?:now|just|also|already|finally)\s+)*(?P<v>{_DONE_VERB})\b(?P<rest>.*)",
        re.I,
    ),
    re.compile(rf"^(?P<v>{_DONE_VERB})\b(?P<rest>.*)", re.I),
    re.compile(
        r"^(?P<all>(?:the\s+|this\s+|that\s+|it\s+|all\s+)?[\w./ -]{1,60}?\s+(?:is|are|has been|have been)\s+"
        r"(?:now\s+)?(?:fixed|resolved|implemented|done|passing|green|working)\b.*)",
        re.I,
    ),
    re.compile(
        r"^(?P<all>(?:all\s+)?(?:the\s+)?tests?\s+(?:now\s+)?(?:pass|passed|passes|are passing)\b.*"
        r"|(?:it|that|this)(?:'s|’s| is)?\s+(?:done|fixed|working)(?:\s+now)?"
        r"|(?:it\s+)?works\s+now|that\s+fixed\s+it|done)$",
        re.I,
    ),
]


def _task(sentence: str) -> str | None:
    if CONDITIONAL.match(sentence) or _DONT.match(sentence):
        return None
    question = sentence.rstrip().endswith("?")
    for i, pattern in enumerate(_TASK_PATTERNS):
        if question and i != 1:  # only "can you ...?" asks for work; "should I add ...?" does not
            continue
        m = pattern.search(sentence)
        if m:
            task = re.sub(r"(?i)[\s,]+(?:please|for me|thanks)\W*$", "", m.group("t"))
            return tidy(task) or None
    return None


def _progress(sentence: str) -> str | None:
    if not asserted(sentence):
        return None
    sentence = sentence.rstrip(" .!")
    for pattern in _PROGRESS_PATTERNS:
        m = pattern.match(sentence)
        if m:
            text = m.group("all") if "all" in m.groupdict() else m.group("v") + m.group("rest")
            text = tidy(text)
            return text[:1].upper() + text[1:] if text else None
    return None


@dataclass
class _CodeFound:
    task: str | None = None
    progress: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    errors: list[CodeError] = field(default_factory=list)


class CodeTracker(Tracker):
    """The current task, its progress, files touched and recent errors.

    The task is the first request in the latest user message that makes one
    ("fix the bug in auth.py", "can you add tests for X"); progress is what
    either side reports as done, kept across tasks (8 most recent). Files come
    from user and assistant messages and from the errors; errors from any message.
    """

    mode = "code"
    sections = ("task", "progress", "files", "errors")
    max_progress = 8

    def __init__(self, spec: Any = None) -> None:
        super().__init__(spec)
        self.task: str | None = None
        self.progress: list[str] = []
        self.files: list[str] = []
        self.errors: list[CodeError] = []

    def _extract(self, said: Sequence[Said]) -> _CodeFound:
        found = _CodeFound()
        files: list[str] = []
        for s in said:
            found.errors = _errors(s.text, s.role) + found.errors
            if s.role not in ("user", "assistant"):
                continue  # tool output lists files it did not touch; only its errors count
            files += _files(s.text)
            for sentence in sentences(prose(s.text)):
                done = _progress(sentence)
                if done:
                    found.progress.insert(0, done)
            if s.role == "user":
                found.task = _first_task(s.text) or found.task
        found.files = list(reversed(files))
        return found

    def _llm_prompt(self) -> str:
        return (
            "You keep the working notes of a coding assistant. From the new messages only, "
            'extract: "task": what the user asked to have done, as a short imperative phrase, '
            'or null if they asked for nothing new; "progress": steps reported as done, as '
            'short past-tense phrases; "files": file paths mentioned or changed, as written; '
            '"errors": errors that actually occurred (not ones merely discussed), each as '
            '{"type": "TypeError", "message": "...", "file": "path" or null, "line": number '
            "or null}. Use null and empty lists when there is nothing. Shape: "
            '{"task": null, "progress": [], "files": [], "errors": []}'
        )

    def _validate(self, value: Any) -> _CodeFound:
        obj = json_object(value, ("task", "progress", "files", "errors"))
        found = _CodeFound(
            task=json_string(obj.get("task"), "task", 200, optional=True),
            progress=json_strings(obj, "progress", 200),
        )
        for i, path in enumerate(json_list(obj, "files")):
            text = json_string(path, f"files[{i}]", 260)
            if text and (
                "\n" in text or (" " in text.strip() and not re.match(r"[A-Za-z]:\\", text))
            ):
                raise ValueError(f"files[{i}] is not a path: {text!r}")
            if text:
                found.files.append(_clean_path(text))
        for i, item in enumerate(json_list(obj, "errors", 10)):
            if not isinstance(item, Mapping):
                raise ValueError(f"errors[{i}] must be an object")
            kind = json_string(item.get("type"), f"errors[{i}].type", 80)
            if kind is None or " " in kind:
                raise ValueError(f"errors[{i}].type must be one word, like TypeError")
            line = item.get("line")
            if line is not None and (
                isinstance(line, bool) or not isinstance(line, int) or line < 1
            ):
                raise ValueError(f"errors[{i}].line must be a positive whole number or null")
            file = json_string(item.get("file"), f"errors[{i}].file", 260, optional=True)
            message = json_string(
                item.get("message", ""), f"errors[{i}].message", 300, optional=True
            )
            found.errors.append(CodeError(kind, message or "", file and _clean_path(file), line))
        return found

    def _merge(self, found: _CodeFound) -> set[str]:
        touched = set()
        if found.task:
            self.task = found.task
            touched.add("task")
        if found.progress:
            self.progress = remember(self.progress, found.progress, self.max_progress, norm)
            touched.add("progress")
        files = found.files + [e.file for e in found.errors if e.file and _project_file(e.file)]
        if files:
            self.files = _merge_files(self.files, files, self.spec.max_files)
            touched.add("files")
        if found.errors:
            errors = list(self.errors)
            for error in reversed(found.errors):
                if error.file:  # name the file the way the files list does
                    same = [f for f in self.files if _same_file(f, error.file)]
                    error = replace(error, file=same[0]) if len(same) == 1 else error
                twin = next((e for e in errors if _same_error(error, e)), None)
                if twin is not None:
                    errors.remove(twin)
                    error = _combine(error, twin)
                errors.insert(0, error)
            self.errors = errors[: self.spec.max_errors]
            touched.add("errors")
        return touched

    def _section_lines(self, section: str) -> list[str]:
        if section == "task":
            return [f"Current task: {clip(self.task)}"] if self.task else []
        if section == "progress":
            return bullets("Progress:", self.progress, 5)
        if section == "files":
            return bullets("Files:", self.files, 10)
        return bullets("Recent errors:", (e.describe() for e in self.errors), self.spec.max_errors)

    def _state(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "progress": list(self.progress),
            "files": list(self.files),
            "errors": [asdict(e) for e in self.errors],
        }

    def _load(self, data: Mapping[str, Any]) -> None:
        task = data.get("task")
        self.task = clip(task, 300) if isinstance(task, str) and task.strip() else None
        self.progress = saved_texts(data.get("progress"), self.max_progress)
        self.files = saved_texts(data.get("files"), self.spec.max_files)
        errors = []
        for item in data.get("errors") or []:
            if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
                continue
            line = item.get("line")
            file = item.get("file")
            errors.append(
                CodeError(
                    item["type"],
                    str(item.get("message") or ""),
                    file if isinstance(file, str) and file else None,
                    line
                    if isinstance(line, int) and not isinstance(line, bool) and line > 0
                    else None,
                )
            )
        self.errors = errors[: self.spec.max_errors]


def _first_task(text: str) -> str | None:
    for sentence in sentences(prose(text)):
        task = _task(sentence)
        if task:
            return task
    return None


def _same_file(a: str, b: str) -> bool:
    """Whether two spellings name one file: equal, or one ends with the other
    at a folder boundary ("auth.py", "src/auth.py", "/home/ana/proj/src/auth.py")."""
    a, b = a.replace("\\", "/"), b.replace("\\", "/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _merge_files(files: Sequence[str], new: Sequence[str], limit: int) -> list[str]:
    """``new`` (front first) in front of ``files``, one entry per file.

    Spellings of one file merge into the shortest that has a folder in it; a
    bare name that fits two tracked paths stays apart from both.
    """
    out = list(files)
    for path in reversed(new):
        same = [p for p in out if _same_file(p, path)]
        if _is_bare(path) and len([p for p in same if p != path]) > 1:
            same = [p for p in same if p == path]
        with_folder = [p for p in (path, *same) if not _is_bare(p)]
        keep = min(with_folder, key=len) if with_folder else path
        out = [keep, *(p for p in out if p not in same)]
    return out[:limit]
