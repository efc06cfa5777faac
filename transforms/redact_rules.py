"""Secret shapes from a maintained ruleset: detect-secrets' regex plugins, loaded at import.

transforms/redact.py keeps its own rules for the shapes it must cut precisely (a URL's password
but not its host, a whole PEM block, `KEY=VALUE` assignments with an entropy test); every other
token shape comes from detect-secrets (Yelp, Apache-2.0), so a new provider's key format arrives
with an upgrade of the pinned package instead of a hand edit here. Nothing is downloaded: the
regexes are read from the installed package's plugin classes, and no plugin's `verify` (which
would call the provider over the network) is ever run.

A plugin's kind is its module name (`sendgrid`, `twilio`, ...) unless one of our own kinds names
the same secret (`stripe` -> `stripe_key`), so one secret gets one kind whichever rule found it.
"""

import importlib
import pkgutil
import re

try:
    import detect_secrets.plugins as _plugins
    from detect_secrets.plugins.base import RegexBasedDetector
except ImportError as exc:  # fail closed: team mode must not run on a weaker ruleset
    raise ImportError("team-mode redaction needs the detect-secrets package (pinned in pyproject.toml: "
                      "pip install detect-secrets==1.5.0)") from exc

# Plugins left out, and why: each is covered better by a rule of ours, or is no secret.
EXCLUDED = {
    "keyword": "a broad keyword heuristic: our KEY=VALUE rules with the entropy test replace it",
    "high_entropy_strings": "any random-looking string (git SHAs, hashes, ids): far too many false hits",
    "basic_auth": "our url_password takes only the password and keeps the user and host",
    "private_key": "matches the BEGIN line only; ours takes the whole PEM block",
    "jwt": "ours stops at the token's end; this one can run on over dots",
    "npm": "runs `.+` to the end of the line, which would cut a JSON string's closing quote; "
           "ours takes npm_ tokens and `_authToken=` values",
    "ip_public": "an IP address is no secret",
}
# Where a plugin's regex may match, as gates on the lowercased text (see redact.py's _SHAPES):
# the regex runs only on a value where its gate fired. A plugin without a gate runs on every
# value (correct, but slow: tests/test_secrets_recall.py asks for one). Each gate starts with
# a literal character, which the engine skips to.
GATES = {
    "artifactory": ("c(?<=akc)", "p(?<=ap)(?=[0-9a-f][a-z0-9]{8})"),
    "aws": ("a(?=(?:3t[a-z0-9]|bia|cca|kia|sia)[a-z0-9]{16})", "w(?<=aw)(?=s)"),
    "azure_storage_key": ("y(?<=accountkey)(?==)",),
    "cloudant": (r"\.(?<=cloudant\.)(?=com)",),
    "discord": (r"\.(?<=[a-z0-9_-]{23}\.)(?=[a-z0-9_-]{6}\.)",),
    "github_token": ("_(?<=gh[pousr]_)",),
    "gitlab_token": ("g(?=l(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-)", "g(?=r1348941)"),
    "mailchimp": ("-(?=us[0-9])",),
    "openai": ("j(?<=t3blbkfj)",),
    "pypi_token": ("-(?<=pypi-)(?=ag)",),
    "sendgrid": (r"\.(?<=sg\.)",),
    "slack": ("x(?=ox[abposr]-)", r"k(?<=slack)(?=\.com/)"),
    "softlayer": (r"y(?<=softlay)(?=er\.com)",),
    "square_oauth": ("-(?<=sq0csp-)",),
    "stripe": ("k(?<=[rs]k)(?=_live_)",),
    "telegram_token": ("[:](?<=[0-9]:)(?=[0-9a-z_-]{35})",),
    "twilio": ("c(?<=ac)(?=[a-z0-9]{32})", "k(?<=sk)(?=[a-z0-9]{32})"),
}
# Where a gate fires on ordinary text (`aws`, an `ap` before a hex digit, `ac` + 32 characters of an
# id) or starts with a run of characters (slow in one regex with the others), the column
# prefilter (redact.py, "whole columns") takes instead a part that every match of the plugin's
# regexes holds, starting with a literal, in Rust regex syntax, on the text before its escapes
# are blanked: blanking only puts spaces where escapes, quotes and non-ASCII were, so a part of a
# match without a space or quote in it is in the original text too.
PREFILTERS = {
    "artifactory": r"AKC[a-zA-Z0-9]{10}|AP[0-9A-F][a-zA-Z0-9]{8}",
    "aws": r"""(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}|(?i:aws.{0,20}(?:key|pw|pass|token).{0,20}["'][0-9a-z/+]{40}["'])""",
    "discord": r"\.[a-zA-Z0-9_-]{6}\.[a-zA-Z0-9_-]{27}",
    "mailchimp": r"-us[0-9]",
    "sendgrid": r"SG\.[a-zA-Z0-9_-]{22}\.",
    "telegram_token": r":[0-9A-Za-z_-]{35}",
    "twilio": r"AC[a-z0-9]{32}|SK[a-z0-9]{32}",
}
# detect-secrets' `build_assignment_regex` rules (IBM Cloud IAM, IBM COS HMAC, SoftLayer, Cloudant
# `<prefix>key = <value>`): their prefix is optional, so they are generic `key = value` rules that
# cost more than all the others together (docs/BENCHMARKS.md, "Figures behind the code's choices");
# our KEY=VALUE rules cover them (a secret-named key, a long random value). Their URL rules are
# kept.
_ASSIGNMENT_BUILDER = r"(?:(?<=\W)|(?<=^))"
# our kind for a plugin's secret, where we have one: (module, index in its denylist) or module
SAME_KIND = {
    "aws": "aws_access_key", ("aws", 1): "aws_secret_key",
    "github_token": "github_token", "gitlab_token": "gitlab_token", "openai": "openai_key",
    "slack": "slack_token", ("slack", 1): "slack_webhook", "stripe": "stripe_key",
}


def _flagged(regex: re.Pattern) -> str:
    """The pattern with its flags inline and scoped, so that patterns can share one regex."""
    flags = "".join(letter for flag, letter in ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"),
                                                  (re.VERBOSE, "x")) if regex.flags & flag)
    return f"(?{flags}:{regex.pattern})" if flags else f"(?:{regex.pattern})"


def load() -> list[tuple[str, str, str]]:
    """(kind, plugin, pattern) of every regex of every included detect-secrets plugin."""
    rules = []
    for module_info in sorted(pkgutil.iter_modules(_plugins.__path__), key=lambda m: m.name):
        name = module_info.name
        if name == "base" or name in EXCLUDED:
            continue
        module = importlib.import_module(f"{_plugins.__name__}.{name}")
        for plugin in sorted(vars(module).values(), key=repr):
            if not (isinstance(plugin, type) and issubclass(plugin, RegexBasedDetector)
                    and plugin is not RegexBasedDetector and plugin.__module__ == module.__name__):
                continue
            for i, regex in enumerate(plugin.denylist):
                if regex.pattern.startswith(_ASSIGNMENT_BUILDER):
                    continue
                kind = SAME_KIND.get((name, i)) or SAME_KIND.get(name) or name
                rules.append((kind, name, _flagged(regex)))
    return rules


RULES = load()
