#!/usr/bin/env python3
"""The manual pages ptfil(1) and ptfil-view(1): they render without a warning,
they document exactly the options and exit statuses that --help gives (no
option missing, none stale, same argument names and defaults), their examples
use only real options, and `make install-man` puts them in man1."""

import os
import re
import shlex
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptfiltest import BUILDDIR, SRCDIR, run, unittest_main  # noqa: E402

PROGRAMS = ("ptfil", "ptfil-view")

# Options of other programs that the pages' examples use.
FOREIGN_OPTIONS = {"--countname"}

# One option as --help lists it and as the OPTIONS section shows it rendered:
# "  -o, --output FILE  description", or with no short option "      --own PATH  description".
# The man page's tags are at column 7.
OPTION = r"(?:(-[A-Za-z0-9]), )?(--[a-z][a-z0-9-]*)(?: ([A-Z][A-Z_]*))?(?=  |$)"
HELP_OPTION = re.compile(r"^( {1,8})" + OPTION)
MAN_OPTION = re.compile(r"^( {7})" + OPTION)
DEFAULT = re.compile(r"\(default:? ([^;,)\s]+)")
# An exit status and what it means, in --help: "127 when PROGRAM cannot be found".
HELP_STATUS = re.compile(r"(?<![\w+-])(128\+N|\d+) (?:when|if|on|for|once) ([^,;.]+)")
MAN_STATUS = re.compile(r"^ {7}(128\+N|\d+)(?: {2,}(.*))?$")
STOP_WORDS = {"the", "and", "when", "was", "with", "its", "for", "once", "are", "has", "been"}
SECTION = re.compile(r"^[A-Z][A-Z ]*[A-Z]$")


def page(name):
    return os.path.join(SRCDIR, "docs", name + ".1")


def tool(name):
    """The path of a formatter the test needs; a missing one is a failure, not a skip."""
    path = shutil.which(name)
    if not path:
        raise AssertionError("%s is not installed: the manual pages cannot be checked "
                             "(tools/install-deps.sh installs groff-base and man-db)" % name)
    return path


def plain_env():
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS"):
        env.pop(k, None)
    return env


def render(name, width=None):
    """The page as plain ASCII text. Without a width, lines are not filled to
    any width (each paragraph on one line), so words are never split or hyphenated."""
    argv = [tool("groff"), "-man", "-Tascii", "-P-cbu"]
    argv.append("-rLL=%dn" % width if width else "-rLL=5000n")
    argv.append(page(name))
    r = run(argv, env=plain_env())
    if r.returncode != 0:
        raise AssertionError("groff could not render %s: %s" % (name, r.stderr.decode()))
    return r.stdout.decode("ascii")


def sections(text):
    """Rendered page → {section name: its lines}."""
    out, cur = {}, None
    for line in text.splitlines():
        if SECTION.match(line):
            cur = line
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return out


def indent(line):
    return len(line) - len(line.lstrip(" "))


def squash(text):
    return " ".join(text.split())


def help_text(program):
    exe = os.path.join(BUILDDIR, program)
    if not os.access(exe, os.X_OK):
        raise AssertionError("%s not found; build it and set PTFIL_BUILDDIR" % exe)
    r = run([exe, "--help"])
    if r.returncode != 0:
        raise AssertionError("%s --help exited %d: %s" % (program, r.returncode, r.stderr.decode()))
    return r.stdout.decode()


def help_options(text):
    """--help → {long: (short, ARG or None, description)}."""
    opts, cur, base = {}, None, 0
    for line in text.splitlines():
        m = HELP_OPTION.match(line)
        if m:
            base = len(m.group(1))
            cur = m.group(3)
            opts[cur] = [m.group(2), m.group(4), line[m.end():]]
        elif cur and line.strip() and indent(line) > base:
            opts[cur][2] += " " + line
        else:
            cur = None
    return {k: (s, a, squash(d)) for k, (s, a, d) in opts.items()}


def man_options(lines):
    """The OPTIONS section → {long: (short, ARG or None, description)}."""
    opts, cur = {}, None
    for line in lines:
        m = MAN_OPTION.match(line)
        if m:
            cur = m.group(3)
            if cur in opts:
                raise AssertionError("%s is described twice" % cur)
            opts[cur] = [m.group(2), m.group(4), ""]
        elif cur and (not line.strip() or indent(line) >= 14):
            opts[cur][2] += " " + line
        else:
            cur = None
    return {k: (s, a, squash(d)) for k, (s, a, d) in opts.items()}


def meaning_words(clause):
    return [w for w in re.findall(r"[a-z_]+", clause.lower()) if len(w) >= 3 and w not in STOP_WORDS]


def help_statuses(text):
    """--help's exit-status paragraph → {status: [meaning words]}."""
    paragraphs = [p for p in text.split("\n\n") if re.search(r"\bexit", p, re.I)]
    if not paragraphs:
        raise AssertionError("--help says nothing about the exit status")
    para = squash(paragraphs[-1])
    while True:
        stripped = re.sub(r"\([^()]*\)", "", para)
        if stripped == para:
            break
        para = stripped
    out = {}
    for m in HELP_STATUS.finditer(para):
        out.setdefault(m.group(1), []).extend(meaning_words(m.group(2)))
    return out


def man_statuses(lines):
    """The EXIT STATUS section → {status: description}."""
    out, cur = {}, None
    for line in lines:
        m = MAN_STATUS.match(line)
        if m:
            cur = m.group(1)
            if cur in out:
                raise AssertionError("exit status %s is described twice" % cur)
            out[cur] = m.group(2) or ""
        elif cur and (not line.strip() or indent(line) >= 14):
            out[cur] += " " + line
        else:
            cur = None
    return {k: squash(v) for k, v in out.items()}


class ManPages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.help = {p: help_text(p) for p in PROGRAMS}
        cls.options = {p: help_options(cls.help[p]) for p in PROGRAMS}
        cls.text = {p: render(p) for p in PROGRAMS}
        cls.sections = {p: sections(cls.text[p]) for p in PROGRAMS}

    def test_help_parsed(self):
        # The parser must see the options, or every other check passes vacuously.
        for p in PROGRAMS:
            self.assertIn("--help", self.options[p], p)
            self.assertIn("--version", self.options[p], p)
            self.assertIn("--output", self.options[p], p)
        self.assertEqual(self.options["ptfil"]["--interval"][1], "MS")
        self.assertEqual(self.options["ptfil-view"]["--top"][1], "N")

    def test_render_without_warnings(self):
        groff, man = tool("groff"), tool("man")
        for p in PROGRAMS:
            r = run([groff, "-man", "-ww", "-z", page(p)], env=plain_env())
            self.assertEqual((r.returncode, r.stderr.decode()), (0, ""), "groff -man -ww on %s" % p)
            env = plain_env()
            env["MANWIDTH"] = "80"
            r = run([man, "--warnings", "-l", page(p)], env=env)
            self.assertEqual((r.returncode, r.stderr.decode()), (0, ""), "man --warnings -l %s" % p)
            self.assertIn(b"SYNOPSIS", r.stdout)

    def test_option_hyphens_escaped(self):
        # "-o" and "--top" in roff must be written \-o and \-\-top: a bare "-" is a
        # hyphen, which may become a Unicode hyphen and cannot be copied and pasted.
        bare = re.compile(r"(?:(?<![\\\w-])|(?<=\\f[BIRP]))-{1,2}[A-Za-z]")
        for p in PROGRAMS:
            with open(page(p)) as f:
                for n, line in enumerate(f, 1):
                    if line.startswith('.\\"'):
                        continue
                    self.assertIsNone(bare.search(line), "%s.1:%d: unescaped hyphen: %r" % (p, n, line))

    def test_fits_80_columns(self):
        for p in PROGRAMS:
            for line in render(p, width=78).splitlines():
                self.assertLessEqual(len(line), 80, "%s: line too wide: %r" % (p, line))

    def test_sections(self):
        want = {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "EXAMPLES", "SEE ALSO"}
        for p in PROGRAMS:
            self.assertLessEqual(want, set(self.sections[p]), p)
            self.assertTrue(squash(" ".join(self.sections[p]["NAME"])).startswith(p + " - "), p)
            see = squash(" ".join(self.sections[p]["SEE ALSO"]))
            for ref in ("ptrace(2)", "proc(5)", ("ptfil-view(1)" if p == "ptfil" else "ptfil(1)")):
                self.assertIn(ref, see, p)
        for s in ("COMMANDS", "SIGNALS", "FILES", "BUGS"):
            self.assertIn(s, self.sections["ptfil"])

    def test_options_match_help(self):
        for p in PROGRAMS:
            helped = self.options[p]
            manned = man_options(self.sections[p]["OPTIONS"])
            self.assertEqual(sorted(set(helped) - set(manned)), [], "%s: in --help, not in the man page" % p)
            self.assertEqual(sorted(set(manned) - set(helped)), [], "%s: in the man page, not in --help" % p)
            for opt, (short, arg, desc) in helped.items():
                mshort, marg, mdesc = manned[opt]
                self.assertEqual((mshort, marg), (short, arg), "%s %s: short option or argument name" % (p, opt))
                self.assertTrue(mdesc, "%s %s: no description in the man page" % (p, opt))
                for value in DEFAULT.findall(desc):
                    self.assertRegex(mdesc, r"\bdefault:?\s+(?:is\s+)?" + re.escape(value) + r"(?![\w-])",
                                     "%s %s: --help gives the default %s" % (p, opt, value))

    def test_no_stale_options(self):
        # Every --long option a page names anywhere is a real one of ptfil or ptfil-view.
        known = set(FOREIGN_OPTIONS)
        for p in PROGRAMS:
            known |= set(self.options[p])
        for p in PROGRAMS:
            for opt in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", self.text[p]):
                self.assertIn(opt, known, "%s: the man page names %s" % (p, opt))

    def test_examples_use_real_options(self):
        for p in PROGRAMS:
            lines = [l.strip() for l in self.sections[p]["EXAMPLES"] if l.strip().startswith("$ ptfil")]
            self.assertTrue(lines, p)
            for line in lines:
                words = shlex.split(line[2:].split("|")[0].replace("&", " "))
                prog = words[0]
                self.assertIn(prog, PROGRAMS, line)
                opts = self.options[prog]
                shorts = {s: a for s, a, _ in opts.values()}
                args = words[2:] if prog == "ptfil" else words[1:]
                if prog == "ptfil":
                    self.assertIn(words[1], ("launch", "attach"), line)
                i = 0
                while i < len(args) and args[i] != "--" and args[i].startswith("-"):
                    a = args[i]
                    if a.startswith("--"):
                        self.assertIn(a, opts, line)
                        takes = opts[a][1]
                    else:
                        self.assertIn(a[:2], shorts, line)
                        takes = shorts[a[:2]] if len(a) == 2 else None
                    i += 2 if takes else 1

    def test_exit_statuses_match_help(self):
        for p in PROGRAMS:
            helped = help_statuses(self.help[p])
            self.assertIn("0", helped, p)
            self.assertIn("2", helped, p)
            manned = man_statuses(self.sections[p]["EXIT STATUS"])
            self.assertEqual(sorted(helped), sorted(manned), "%s: exit statuses, --help against the man page" % p)
            for status, words in helped.items():
                desc = manned[status].lower()
                for w in words:
                    self.assertRegex(desc, r"\b%s\b" % re.escape(w),
                                     "%s: exit status %s, --help says %r" % (p, status, words))
        if "PROGRAM's exit status" in self.help["ptfil"]:
            section = squash(" ".join(self.sections["ptfil"]["EXIT STATUS"]))
            self.assertIn("exit status of PROGRAM", section)

    def test_install_man(self):
        makefile = os.path.join(BUILDDIR, "Makefile")
        self.assertTrue(os.path.exists(makefile), "%s: not configured" % BUILDDIR)
        dest = tempfile.mkdtemp(prefix="ptfil-man-")
        try:
            r = run([tool("make"), "-s", "-C", BUILDDIR, "install-man", "DESTDIR=" + dest], env=plain_env())
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            found = {}
            for root, _, files in os.walk(dest):
                for f in files:
                    found.setdefault(f, []).append(os.path.join(root, f))
            want_dir = os.path.join(dest + mandir(makefile), "man1")
            for p in PROGRAMS:
                self.assertEqual(found.get(p + ".1"), [os.path.join(want_dir, p + ".1")], p)
                with open(page(p), "rb") as a, open(os.path.join(want_dir, p + ".1"), "rb") as b:
                    self.assertEqual(a.read(), b.read(), "%s.1 installed differs from docs/" % p)
        finally:
            shutil.rmtree(dest, ignore_errors=True)


def mandir(makefile):
    """mandir as configure set it in the Makefile, its ${prefix} and friends expanded."""
    vars_ = {}
    with open(makefile) as f:
        for line in f:
            m = re.match(r"^([A-Za-z_]+) = (.*)$", line.rstrip("\n"))
            if m:
                vars_.setdefault(m.group(1), m.group(2).strip())

    def expand(v, depth=0):
        if depth > 10:
            raise AssertionError("cannot expand %r" % v)
        return re.sub(r"\$[{(]([A-Za-z_]+)[})]", lambda m: expand(vars_.get(m.group(1), ""), depth + 1), v)

    d = expand(vars_["mandir"])
    if not d.startswith("/"):
        raise AssertionError("mandir %r is not absolute" % d)
    return d


if __name__ == "__main__":
    unittest_main("test_manpages")
