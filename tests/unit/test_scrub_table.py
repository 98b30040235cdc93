"""The one scrubber, spelling by spelling: a credential written any usual way leaves
nothing of its value, and the harmless text around it (or prose that only looks like
it) is kept."""

from __future__ import annotations

import random
import time

import pytest

from interlock.egress import shown
from interlock.scrubbing import REDACTED, StreamScrubber, scrub_error, scrub_text

P = pytest.param

# Each case: the text, the values that must be gone, the text that must stay.
LEAKS = [
    P(
        "see files.example.org/r.csv?token=Vq81abc now",
        ["Vq81abc", "token="],
        ["see files.example.org/r.csv now"],
        id="schemeless-url-query-token",
    ),
    P("www.example.org?x=1&sid=Hj77kq", ["Hj77kq", "x=1"], ["www.example.org"], id="www-query"),
    P(
        "https\uff1a//x.example.org/a?token=Fw92abc",
        ["Fw92abc"],
        ["x.example.org/a"],
        id="fullwidth-colon",
    ),
    P(
        "https:\uff0f\uff0fx.example.org\uff0fa\uff1ftoken=Fs52abc",
        ["Fs52abc"],
        ["x.example.org"],
        id="fullwidth-slashes-and-question-mark",
    ),
    P(
        "https\u2236//x.example.org/a?token=Rt11abc",
        ["Rt11abc"],
        ["x.example.org/a"],
        id="ratio-sign-colon",
    ),
    P("api_key=Kk42zzzq", ["Kk42zzzq"], ["api_key=" + REDACTED], id="bare-api-key"),
    P("token: Tq77xyz and more", ["Tq77xyz"], ["token: ", " and more"], id="token-colon"),
    P("apikey=Ap09qq", ["Ap09qq"], [], id="apikey"),
    P("x-api-key: Xk12qq", ["Xk12qq"], ["x-api-key: "], id="api-key-header"),
    P("password=hunter2", ["hunter2"], ["password="], id="password-equals"),
    P("api_key=abc123def", ["abc123def"], ["api_key="], id="api-key-word-and-digits"),
    P("connect(password=hunter2)", ["hunter2"], ["connect(password=", ")"], id="password-arg"),
    P("password=p@ssw0rd!", ["p@ssw0rd"], ["password="], id="password-with-symbols"),
    P('token = "sk_short"', ["sk_short"], ['token = "'], id="token-quoted"),
    P("passwd: swordfish", ["swordfish"], ["passwd: "], id="passwd-prose-word"),
    P("pwd=s3same", ["s3same"], [], id="pwd"),
    P("client_secret=Cs88abc", ["Cs88abc"], [], id="client-secret"),
    P("secret = 'sh-hidden'", ["sh-hidden"], ["secret = '"], id="secret-spaced-quoted"),
    P("TOKEN=UpPeR99", ["UpPeR99"], ["TOKEN="], id="uppercase-name"),
    P(
        "Authorization: Bearer ab.cd.Ef99zz then",
        ["ab.cd.Ef99zz"],
        ["Authorization: Bearer ", " then"],
        id="authorization-bearer",
    ),
    P("curl -H 'Bearer Zr91mmmq'", ["Zr91mmmq"], ["Bearer "], id="bare-bearer"),
    P("Basic dXNlcjpwYXNz", ["dXNlcjpwYXNz"], ["Basic "], id="basic-credential"),
    P(
        '{"password": "my secret phrase", "user": "bob"}',
        ["my secret phrase"],
        ['"user": "bob"'],
        id="json-password",
    ),
    P(
        '{\\"password\\": \\"Esc4ped1\\"}',
        ["Esc4ped1"],
        ['{\\"password\\": \\"'],
        id="json-escaped-password",
    ),
    P(
        "\u201cpassword\u201d: \u201cCurly77x\u201d",
        ["Curly77x"],
        ["\u201cpassword\u201d"],
        id="curly-quotes",
    ),
    P("**Password:** Bold55xx", ["Bold55xx"], ["**Password:** "], id="markdown-bold-name"),
    P("to\u200bken=Zw55abc", ["Zw55abc"], [], id="zero-width-inside-name"),
    P("tok\u00adEN=Sh09abc", ["Sh09abc"], [], id="soft-hyphen-inside-name"),
    P("token%3DPe77abcd", ["Pe77abcd"], ["token%3D"], id="percent-encoded-separator"),
    P(
        "next=https%3A%2F%2Fx.example.org%2Fcb%3Fcode%3DPc44abc",
        ["Pc44abc"],
        ["https%3A%2F%2Fx.example.org%2Fcb"],
        id="percent-encoded-url",
    ),
    P(
        "https:\\/\\/x.example.org\\/a?token=Js33abc",
        ["Js33abc"],
        ["x.example.org\\/a"],
        id="json-escaped-url",
    ),
    P(
        "https://bob:Pw66zzz@x.example.org/a",
        ["Pw66zzz", "bob:"],
        ["https://x.example.org/a"],
        id="userinfo-in-url",
    ),
    P(
        "bob:Pw67zzz@x.example.org/a",
        ["Pw67zzz"],
        ["x.example.org/a"],
        id="userinfo-without-scheme",
    ),
    P(
        "https://x.example.org/cb#access_token=Fr88abc&state=1",
        ["Fr88abc"],
        ["https://x.example.org/cb"],
        id="fragment-token",
    ),
    P(
        "[the file](https://x.example.org/a?sig=Lk20abc).",
        ["Lk20abc"],
        ["[the file](https://x.example.org/a)."],
        id="markdown-link",
    ),
    P(
        "https://s3.example.org/b/k?X-Amz-Signature=ab12cd34&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE",
        ["ab12cd34", "AKIAIOSFODNN7EXAMPLE"],
        ["https://s3.example.org/b/k"],
        id="presigned-url",
    ),
    P("X-Amz-Security-Token: FQoGZXIvYXdzEJr", ["FQoGZXIvYXdzEJr"], [], id="amz-security-token"),
    P("the id is AKIAIOSFODNN7EXAMPLE.", ["AKIAIOSFODNN7EXAMPLE"], ["the id is "], id="aws-akia"),
    P("ASIAY34FZKBOKMUTVV7A", ["ASIAY34FZKBOKMUTVV7A"], [], id="aws-asia"),
    P(
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ["wJalrXUtnFEMI"],
        ["AWS_SECRET_ACCESS_KEY="],
        id="aws-secret-env",
    ),
    P(
        "use sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78 here",
        ["Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78"],
        ["use ", " here"],
        id="openai-sk-key",
    ),
    P("xoxb-1234567890-AbCdEfGhIj", ["AbCdEfGhIj", "1234567890"], [], id="slack-xoxb"),
    P("xoxp-99887766-55443322-Qq", ["99887766"], [], id="slack-xoxp"),
    P("ghp_" + "a1B2c3D4e5" * 4, ["a1B2c3D4e5"], [], id="github-ghp"),
    P("github_pat_11ABCDEFG0" + "x" * 30, ["11ABCDEFG0"], [], id="github-pat"),
    P(
        "bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw ok",
        ["AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"],
        ["bot ", " ok"],
        id="telegram-bot-token",
    ),
    P(
        "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe",
        ["AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"],
        ["https://api.telegram.org/bot", "/getMe"],
        id="telegram-token-in-path",
    ),
    P(
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX3g",
        ["eyJzdWIiOiIxMjM0In0", "c2lnbmF0dXJlX3g"],
        [],
        id="jwt",
    ),
    P(
        "session=Sx12abcdEf56; sessionid: Sy34abcd",
        ["Sx12abcdEf56", "Sy34abcd"],
        [],
        id="session-cookies",
    ),
    P(
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        ["AIzaSyA1234567890"],
        [],
        id="google-api-key",
    ),
    P(
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234567890abcd\n"
        "q9ZxBase64Line0987654321==\n-----END RSA PRIVATE KEY-----\nThat is all.",
        ["MIIEowIBAAKCAQEA1234567890abcd", "q9ZxBase64Line0987654321"],
        ["-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----\nThat is all."],
        id="private-key-block",
    ),
    P("code=4/0AX4XfWhQm72kLp", ["0AX4XfWhQm72kLp"], ["code="], id="oauth-code-query-form"),
    P("f(key=Kx9Lm2Pq7Rs4)", ["Kx9Lm2Pq7Rs4"], ["f(key=", ")"], id="random-key-argument"),
    P("signing key: Kx9Lm2Pq7Rs4", ["Kx9Lm2Pq7Rs4"], ["signing key: "], id="random-key-value"),
]

# Text that only looks like a credential: it must come back as it was.
KEPT = [
    P("the token budget is 5", id="token-in-prose"),
    P("key points: speed, cost and safety", id="key-points"),
    P("Key: JavaScript", id="key-word-value"),
    P("the HTTP status code: 404", id="status-code"),
    P("Basic authentication sends a password.", id="basic-authentication"),
    P("Bearer tokens expire; the bearer of one is trusted.", id="bearer-prose"),
    P("max_tokens=4096 and tokens: 512", id="token-counts"),
    P("Have you seen example.org? It's great.", id="question-after-host"),
    P("Read README.md#install and docs.example.org/guide.", id="anchor-and-path"),
    P("mail alice@example.org or bob@example.org?", id="email-addresses"),
    P("Python 3.12/3.13 and node.js/deno", id="versions-and-names"),
    P("https://data.example.org/table.csv", id="clean-url"),
    P("if token == expected: return", id="comparison"),
    P(
        "\u8868\u3092\u898b\u3066\u304f\u3060\u3055\u3044\uff1a\u3053\u308c\u3067\u3059\u3002",
        id="cjk-prose",
    ),
    P("Sessions: morning and evening", id="sessions"),
]

# Code and commands, as a tool input carries them: nothing in them is a secret.
CODE = [
    P("sorted(xs, key=len)", id="key-function"),
    P("sort(key=lambda r: r[1])", id="key-lambda"),
    P("password = getpass.getpass()", id="password-prompt"),
    P("token = get_token()", id="token-call"),
    P('api_key = os.environ["API_KEY"]', id="key-from-environment"),
    P('password = input("Password: ")', id="password-input"),
    P("token=$TOKEN curl https://api.example.org/v1", id="shell-variable"),
    P("api_key = settings.API_KEY_2", id="key-from-settings"),
    P("KEY=production make", id="shell-assignment"),
    P("export KEY=production", id="shell-export"),
    P("SELECT code, session_id FROM t WHERE key = 'k1'", id="sql"),
    P("dict(auth=None)", id="auth-none"),
    P("session = requests.Session()", id="session-object"),
    P("key = hashlib.sha256(data).hexdigest()", id="key-digest"),
    P("cache[key] = user_id_12345678", id="key-subscript"),
]


@pytest.mark.parametrize(("text", "gone", "kept"), LEAKS)
def test_a_credential_in_any_spelling_leaves_nothing_of_its_value(
    text: str, gone: list[str], kept: list[str]
) -> None:
    scrubbed = scrub_text(text)
    for value in gone:
        assert value not in scrubbed, (value, scrubbed)
    for part in kept:
        assert part in scrubbed, (part, scrubbed)
    assert scrub_text(scrubbed) == scrubbed, "scrubbing twice changes nothing more"


@pytest.mark.parametrize("text", KEPT)
def test_prose_that_only_looks_like_a_credential_is_kept(text: str) -> None:
    assert scrub_text(text) == text


@pytest.mark.parametrize("text", CODE)
def test_code_that_names_a_key_or_a_password_is_kept(text: str) -> None:
    assert scrub_text(text) == text


def test_existing_spellings_keep_their_exact_form() -> None:
    leaky = "https://data.example.org/table.csv?token=tok-7f3a9c#part-2"
    assert scrub_text(f"fetch {leaky} now") == "fetch https://data.example.org/table.csv now"
    assert shown("gopher://a.example/?token=tok-7f3a9c") == "gopher://a.example/"
    # An invisible character outside what is removed stays where it was.
    assert scrub_text("\u200bhttps://u:p@a.example.org/x?t=1") == "\u200bhttps://a.example.org/x"
    # A value ends where it does: the bracket closing the call around it stays.
    assert scrub_text("connect(password=hunter2)") == "connect(password=[redacted])"
    assert scrub_text("f(key=Kx9Lm2Pq7Rs4), then") == "f(key=[redacted]), then"


def test_a_long_text_is_scrubbed_in_linear_time() -> None:
    unit = (
        "The token budget is 5; see https://x.example.org/a?token=abc123 and "
        "files.example.org/r?sig=zz99 with api_key=Kk42zzzq, key points, \u200b\uff1a "
    )
    text = (unit * (200_000 // len(unit) + 1))[:200_000]
    hostile = [
        text,
        "a" * 200_000,
        "a_" * 100_000,
        "a." * 100_000,
        "a!" * 100_000,
        "eyJ" * 66_000,
        "1" * 200_000 + ":",
        "token=" * 33_000,
        'password: "' * 18_000,
        "x.example.org/" * 14_000,
        "\\" * 200_000,
        "\uff1a" * 200_000,
        "-----BEGIN PRIVATE KEY-----" * 7_000,
    ]
    for sample in hostile:
        began = time.perf_counter()
        scrub_text(sample)
        assert time.perf_counter() - began < 2.0, sample[:20]
    assert "abc123" not in scrub_text(text) and "Kk42zzzq" not in scrub_text(text)


@pytest.mark.parametrize(
    "sample",
    [
        P("https://a.bc/?x" + ")" * 200_000, id="closers-after-a-query"),
        P("a.bc/?x" + ")" * 200_000, id="closers-after-a-schemeless-query"),
        P("https://a.bc/#x" + "])}" * 66_000, id="mixed-closers-after-a-fragment"),
        P("https://a.bc/?x" + ").," * 66_000, id="closers-and-punctuation"),
        P("https://a.bc/?" + "(" * 100_000 + ")" * 100_000, id="balanced-brackets"),
        P("a.bc/#" + "a1" * 100_000, id="long-fragment"),
        P("password=" + ")" * 200_000, id="closers-after-a-name"),
        P("key=a1" + ")" * 200_000, id="closers-after-a-value"),
        P("key=(a1" * 28_000, id="repeated-open-values"),
        P("token=hunter2.x" * 13_000, id="repeated-member-access"),
    ],
)
def test_trailing_brackets_and_punctuation_take_linear_time(sample: str) -> None:
    began = time.perf_counter()
    scrub_text(sample)
    assert time.perf_counter() - began < 1.0


def test_streamed_pieces_are_scrubbed_as_the_whole_text_would_be() -> None:
    # Given texts whose credentials may straddle any two pieces
    texts = [
        "Here: files.example.org/r.csv?token=Vq81abc and Authorization: Bearer ab.cd.Ef99zz ok.",
        '{"password": "my secret phrase", "user": "bob"} then token: Tq77xyz and '
        "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78 done",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234567890abcd\n"
        "-----END RSA PRIVATE KEY-----\nbye",
        "https\uff1a//x.example.org/a?token=Fw92abc and to\u200bken=Zw55abc **Password:** B55xyz",
    ]
    chooser = random.Random(7)
    for text in texts:
        for _ in range(200):
            # When it arrives in pieces of one to six characters
            scrubber, released = StreamScrubber(), []
            index = 0
            while index < len(text):
                size = chooser.randint(1, 6)
                released.append(scrubber.push(text[index : index + size]))
                index += size
            released.append(scrubber.flush())
            # Then what was released is what scrubbing the whole would give
            assert "".join(released) == scrub_text(text)


def test_streamed_text_is_released_word_by_word() -> None:
    scrubber = StreamScrubber()
    assert [scrubber.push(w) for w in ("one ", "two ", "thr", "ee ", "token: ", "Tq77xyz ")] == [
        "one ",
        "two ",
        "",
        "three ",
        "",  # the name waits for its value
        "token: " + REDACTED + " ",
    ]
    assert scrubber.flush() == ""


def test_an_error_loses_every_configured_secret_and_every_credential() -> None:
    key = "local-endpoint-credential-7Hq2"
    said = (
        f"401 Incorrect API key provided: {key} (url-encoded: local-endpoint-credential-7Hq2)"
        " at https://llm.example.org/v1?api_key=other"
    )
    cleaned = scrub_error(said, [key, "", "none"])
    assert key not in cleaned and "other" not in cleaned
    assert cleaned.startswith("401 Incorrect API key provided: " + REDACTED)
    # A value too short to be a key is not looked for (it would erase ordinary words).
    assert scrub_error("none of it", ["none"]) == "none of it"
