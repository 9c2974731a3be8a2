"""A planted corpus: secrets of well over 100 kinds, random on every run, and a realistic Claude
Code session written from scratch that carries them in every place the product shows text.

Nothing secret-shaped is committed: every value is drawn at run time from a generator seeded per
run. The seed is ``CONTEXTLAB_REDACTION_SEED`` when set, else a fresh random number; tests print
it in every failure message, so a failure reproduces with the same values.
"""

from __future__ import annotations

import base64
import html
import json
import os
import random
import re
import secrets
import string
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

SEED = int(os.environ.get("CONTEXTLAB_REDACTION_SEED") or secrets.randbits(32))
#: a shared byte that holds any 12 consecutive characters of a secret's random core leaks it
PIECE = 12

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = LOWER + UPPER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
#: what people put in passwords, less the characters that JSON (", \) or a URL (@ : /) escape
PUNCT = "!#%^*()-_=+.~$&"
BARE_PUNCT = "!#%^*-_.~+"


@dataclass(frozen=True)
class Planted:
    kind: str
    #: the text written into the transcript (a line of a file, a command, a sentence)
    text: str
    #: the random parts: no 12-character piece of them may reach anything shared
    cores: tuple[str, ...]


def seed_note(seed: int = SEED) -> str:
    return f"planted seed {seed} (rerun with CONTEXTLAB_REDACTION_SEED={seed})"


class _Draw:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chars(self, n: int, alphabet: str = ALNUM) -> str:
        """``n`` characters with a digit, an upper and a lower letter when the alphabet has them
        (so no value is by chance a plain word)."""
        classes = [c for c in (DIGITS, UPPER, LOWER) if any(ch in alphabet for ch in c)]
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(n))
            if all(any(ch in cls for ch in value) for cls in classes):
                return value

    def password(self, n: int = 16, punct: str = BARE_PUNCT) -> str:
        # starts with a letter or digit, as a value right after "=" or ":" usually does
        return self.rng.choice(ALNUM) + self.chars(n - 1, ALNUM + punct)

    def hex(self, n: int) -> str:
        return "".join(self.rng.choice(HEX) for _ in range(n))

    def digits(self, n: int) -> str:
        return str(self.rng.randrange(1, 10)) + "".join(
            self.rng.choice(DIGITS) for _ in range(n - 1)
        )

    def word(self) -> str:
        return self.rng.choice(["alice", "bob", "deploy", "svc", "admin", "ci", "app"])

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def make_planted(seed: int = SEED) -> list[Planted]:
    """Every kind, drawn from ``seed``."""
    d = _Draw(seed)
    out: list[Planted] = []

    def add(kind: str, text: str, *cores: str) -> None:
        out.append(Planted(kind, text, cores or (text,)))

    # --- provider tokens with a known shape ------------------------------------------------
    c = d.chars(93, B64URL)
    add("anthropic-api-key", f"sk-ant-api03-{c}AA", c)
    c = d.chars(93, B64URL)
    add("anthropic-admin-key", f"sk-ant-admin01-{c}AA", c)
    c = d.chars(120, B64URL)
    add("openai-project-key", f"sk-proj-{c}", c)
    a, b = d.chars(20), d.chars(20)
    add("openai-legacy-key", f"sk-{a}T3BlbkFJ{b}", a, b)
    for prefix in ("ghp", "gho", "ghu", "ghs", "ghr"):
        c = d.chars(36)
        add(f"github-{prefix}", f"{prefix}_{c}", c)
    c = d.chars(22) + "_" + d.chars(59)
    add("github-fine-grained-pat", f"github_pat_{c}", c)
    c = d.chars(20, B64URL)
    add("gitlab-pat", f"glpat-{c}", c)
    c = d.chars(20, B64URL)
    add("gitlab-runner-token", f"glrt-{c}", c)
    c = d.chars(16, UPPER + DIGITS)
    add("aws-access-key-id", f"AKIA{c}", c)
    c = d.chars(16, UPPER + DIGITS)
    add("aws-temporary-key-id", f"ASIA{c}", c)
    c = d.chars(40, B64)
    add("aws-secret-env", f"AWS_SECRET_ACCESS_KEY={c}", c)
    key_id, secret, token = d.chars(16, UPPER + DIGITS), d.chars(40, B64), d.chars(300, B64)
    add(
        "aws-credentials-file",
        f"[default]\naws_access_key_id = AKIA{key_id}\naws_secret_access_key = {secret}\n"
        f"aws_session_token = {token}\nregion = eu-west-1",
        key_id,
        secret,
        token,
    )
    secret = d.chars(40, B64)
    add("aws-secret-lower-yaml", f"aws_secret_access_key: {secret}", secret)
    a, b = d.digits(12), d.chars(24)
    c = f"{d.digits(12)}-{a}-{b}"
    add("slack-bot-token", f"xoxb-{c}", c)
    c = f"{d.digits(12)}-{d.digits(12)}-{d.digits(12)}-{d.hex(32)}"
    add("slack-user-token", f"xoxp-{c}", c)
    c = f"T{d.chars(10, UPPER + DIGITS)}/B{d.chars(10, UPPER + DIGITS)}/{d.chars(24)}"
    add("slack-webhook", f"https://hooks.slack.com/services/{c}", c)
    for prefix in ("sk_live", "rk_live", "sk_test"):
        c = d.chars(99)
        add(f"stripe-{prefix}", f"{prefix}_{c}", c)
    c = d.chars(32)
    add("stripe-webhook-secret", f"whsec_{c}", c)
    c = d.chars(35, B64URL)
    add("google-api-key", f"AIza{c}", c)
    c = d.chars(28, B64URL)
    add("google-oauth-secret", f"GOCSPX-{c}", c)
    c = d.chars(36)
    add("npm-token", f"npm_{c}", c)
    c = d.chars(36)
    add("npmrc-auth-token", f"//registry.npmjs.org/:_authToken={c}", c)
    c = _b64(d.password(18))
    add("npmrc-password", f"//npm.pkg.example.net/:_password={c}", c)
    c = d.chars(120, B64URL)
    add("pypi-token", f"pypi-AgEIcHlwaS5vcmc{c}", c)
    a, b = d.chars(22, B64URL), d.chars(43, B64URL)
    add("sendgrid-key", f"SG.{a}.{b}", a, b)
    c = d.hex(32)
    add("twilio-api-key", f"SK{c}", c)
    c = d.hex(32)
    add("twilio-account-sid-auth", f"TWILIO_AUTH_TOKEN={c}", c)
    c = d.hex(32)
    add("mailgun-key", f"key-{c}", c)
    c = d.hex(32)
    add("mailchimp-key", f"{c}-us{d.rng.randrange(1, 20)}", c)
    c = d.hex(64)
    add("digitalocean-token", f"dop_v1_{c}", c)
    c = d.hex(32)
    add("shopify-token", f"shpat_{c}", c)
    c = d.chars(34, LOWER + UPPER)
    add("huggingface-token", f"hf_{c}", c)
    a, b = d.digits(18), d.chars(68, B64URL)
    add("discord-webhook", f"https://discord.com/api/webhooks/{a}/{b}", b)
    a, b = d.digits(10), d.chars(35, B64URL)
    add("telegram-bot-token", f"{a}:AA{b}", b)
    c = d.chars(22, B64URL)
    add("square-token", f"sq0atp-{c}", c)
    c = d.hex(32)
    add("databricks-token", f"dapi{c}", c)
    c = d.chars(43)
    add("doppler-token", f"dp.pt.{c}", c)
    c = d.chars(27, UPPER + DIGITS)
    add("newrelic-key", f"NRAK-{c}", c)
    c = d.hex(32)
    add("sentry-dsn", f"https://{c}@o{d.digits(6)}.ingest.sentry.io/{d.digits(7)}", c)
    c = d.chars(86, B64) + "=="
    add(
        "azure-storage-connection-string",
        f"DefaultEndpointsProtocol=https;AccountName=acme{d.hex(6)};AccountKey={c};"
        "EndpointSuffix=core.windows.net",
        c[:-2],
    )
    c = d.chars(60, B64URL)
    add(
        "azure-sas-token",
        f"https://acme.blob.core.windows.net/c/x.zip?sv=2022-11-02&sp=r&sig={c}",
        c,
    )
    c = d.chars(3) + "8Q~" + d.chars(31, ALNUM + "~._-")
    add("azure-client-secret", f"AZURE_CLIENT_SECRET={c}", c)
    c = d.chars(90, B64URL)
    add("vault-token", f"hvs.{c}", c)
    a, b = d.chars(14), d.chars(67)
    add("terraform-cloud-token", f"{a}.atlasv1.{b}", a, b)
    c = d.chars(32)
    add("grafana-service-account", f"glsa_{c}_{d.hex(8)}", c)
    c = d.chars(40)
    add("linear-api-key", f"lin_api_{c}", c)
    c = d.hex(24) + "-" + d.hex(34)
    add("postman-api-key", f"PMAK-{c}", c)
    c = d.chars(43, B64URL)
    add("planetscale-password", f"pscale_pw_{c}", c)
    c = d.chars(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")  # bech32
    add("age-secret-key", f"AGE-SECRET-KEY-1{c}", c)
    c = d.chars(42, B64URL)
    add("okta-ssws", f"Authorization: SSWS {c}", c)
    c = "A" * 22 + d.chars(90, ALNUM + "%")
    add("twitter-bearer", f"TWITTER_BEARER_TOKEN={c}", c[22:])
    c = d.digits(11) + d.chars(35)
    add("notion-token", f"ntn_{c}", c)

    # --- private keys and signed tokens ----------------------------------------------------
    for label in ("RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"):
        body = [d.chars(64, B64) for _ in range(5)]
        add(
            f"private-key-{label.split()[0].lower()}",
            f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----",
            *body,
        )
    body = [d.chars(64, B64) for _ in range(4)]
    add(
        "pgp-private-key",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
        + "\n".join(body)
        + "\n-----END PGP PRIVATE KEY BLOCK-----",
        *body,
    )
    key_id = d.hex(40)
    body = [d.chars(64, B64) for _ in range(4)]
    service_account = {
        "type": "service_account",
        "project_id": "acme-prod",
        "private_key_id": key_id,
        "private_key": "-----BEGIN PRIVATE KEY-----\n"
        + "\n".join(body)
        + "\n-----END PRIVATE KEY-----\n",
        "client_email": "deployer@acme-prod.iam.gserviceaccount.com",
        "client_id": d.digits(21),
    }
    add("gcp-service-account", json.dumps(service_account, indent=2), key_id, *body)
    payload = (
        base64.urlsafe_b64encode(json.dumps({"sub": d.chars(16), "iat": 1_700_000_000}).encode())
        .decode()
        .rstrip("=")
    )
    signature = d.chars(43, B64URL)
    add("jwt", f"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.{payload}.{signature}", payload, signature)

    # --- credentials in URLs and connection strings ----------------------------------------
    for scheme in ("postgres", "postgresql", "mysql", "mongodb+srv", "amqp", "https"):
        c = d.password(16, "!*-_.~")
        add(f"url-credentials-{scheme}", f"{scheme}://{d.word()}:{c}@db.acme.internal:5432/app", c)
    c = d.password(18, "!*-_.~")
    add("redis-url-password", f"redis://:{c}@cache.acme.internal:6379/0", c)
    c = d.chars(40)
    add("git-clone-token", f"git clone https://x-access-token:{c}@github.com/acme/app.git", c)
    c = d.password(16, "!#%^*-_.~")
    add(
        "sqlserver-connection-string",
        f"Data Source=sql01;Initial Catalog=App;User Id=sa;Password={c};TrustServerCertificate=True",
        c,
    )
    c = d.password(16, "!#%^*-_.~")
    add(
        "azure-sql-connection-string",
        f"Server=tcp:acme.database.windows.net,1433;Initial Catalog=app;Persist Security Info=False;"
        f"User ID=app;Password={c};MultipleActiveResultSets=False;Encrypt=True;",
        c,
    )
    c = d.password(16, "!*-_.~")
    add("jdbc-password", f"jdbc:mysql://db:3306/app?user=app&password={c}&useSSL=true", c)
    c = d.password(16, "!*-_.~")
    add("odbc-pwd", f"Driver={{PostgreSQL}};Server=db;Uid=app;Pwd={c};", c)

    # --- keyword and value: config files, env, code ----------------------------------------
    c = d.password()
    add("yaml-password-lower", f"database:\n  host: db\n  password: {c}\n  port: 5432", c)
    c = d.password()
    add("yaml-db-password", f"  db_password: {c}", c)
    c = d.password(20, PUNCT)
    add("yaml-quoted-password", f'smtp:\n  password: "{c}"', c)
    c = d.password()
    add("compose-mysql-root-password", f"    environment:\n      MYSQL_ROOT_PASSWORD: {c}", c)
    c = d.password()
    add("compose-list-password", f"      - POSTGRES_PASSWORD={c}", c)
    c = _b64(d.password(20))
    add(
        "kubernetes-secret-data",
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n"
        f"  username: {_b64('admin')}\n  password: {c}",
        c.rstrip("="),
    )
    c = d.password(20, PUNCT)
    add("json-password", f'{{"user": "app", "password": "{c}"}}', c)
    c = d.chars(32)
    add("json-api-key", f'{{"api_key": "{c}", "region": "eu"}}', c)
    c = d.chars(40, B64URL)
    add("json-client-secret", f'{{"client_id": "app", "client_secret": "{c}"}}', c)
    c = d.chars(40, B64URL)
    add("json-access-token", f'{{"access_token": "{c}", "token_type": "bearer"}}', c)
    c = d.chars(40, B64URL)
    add("json-refresh-token", f'"refresh_token": "{c}"', c)
    c = d.password()
    add("env-export-lower", f"export db_password={c}", c)
    c = d.password()
    add("env-db-pass", f"DB_PASS={c}", c)
    c = d.password()
    add("env-database-password", f"DATABASE_PASSWORD={c}", c)
    c = d.chars(32)
    add("env-api-token", f"API_TOKEN={c}", c)
    c = d.chars(32)
    add("env-plain-secret", f"SECRET={c}", c)
    c = d.password(20, PUNCT)
    add("env-quoted", f'SMTP_PASSWORD="{c}"', c)
    c = d.password(20, PUNCT)
    add("env-single-quoted", f"REDIS_PASSWORD='{c}'", c)
    c = d.password()
    add("env-mail-pass", f"MAIL_PASS={c}", c)
    c = d.password(20, PUNCT)
    add("tfvars-password", f'db_password = "{c}"', c)
    c = d.chars(40, B64URL)
    add("hcl-token", f'  token = "{c}"', c)
    c = d.password(20, PUNCT)
    add("python-password", f'password = "{c}"', c)
    c = d.password(20, PUNCT)
    add("python-kwarg", f'conn = psycopg.connect(host="db", user="app", password="{c}")', c)
    c = d.chars(32)
    add("python-dict-token", f'headers = {{"X-Auth-Token": "{c}"}}', c)
    c = d.chars(32)
    add("js-api-key", f'const apiKey = "{c}";', c)
    c = d.chars(32)
    add("js-object-secret", f"  clientSecret: '{c}',", c)
    c = d.chars(32)
    add("go-token", f'token := "{c}"', c)
    c = d.chars(32)
    add("toml-secret", f'secret = "{c}"', c)
    c = d.password()
    add("ini-password-bare", f"[database]\nuser = app\npassword = {c}", c)
    c = d.password()
    add("properties-password", f"spring.datasource.password={c}", c)
    c = d.password()
    add("xml-password", f"<password>{c}</password>", c)
    c = d.password(20, PUNCT)
    add("php-define-password", f"define( 'DB_PASSWORD', '{c}' );", c)
    c = d.chars(64, ALNUM + "!#%^*()-_=+.~$&[]{}<>|;:,?")
    add("wordpress-auth-key", f"define('AUTH_KEY',         '{c}');", c)
    c = d.chars(50, LOWER + DIGITS + "!@#$%^&*(-_=+)")
    add("django-secret-key", f"SECRET_KEY = 'django-insecure-{c}'", c)
    c = d.hex(128)
    add("rails-secret-key-base", f"secret_key_base: {c}", c)
    c = d.password(20, PUNCT)
    add("powershell-securestring", f'$pw = ConvertTo-SecureString "{c}" -AsPlainText -Force', c)
    c = d.password()
    add("helm-set-password", f"helm install db bitnami/postgresql --set auth.password={c}", c)
    c = d.password()
    add(
        "kubectl-from-literal",
        f"kubectl create secret generic db --from-literal=username=app --from-literal=password={c}",
        c,
    )

    # --- command lines ---------------------------------------------------------------------
    c = d.password()
    add("mysql-p", f"mysql -u root -p{c} app < dump.sql", c)
    c = d.password()
    add("mysql-password-flag", f"mysqldump --user=root --password={c} app > dump.sql", c)
    c = d.password()
    add("pgpassword-env", f"PGPASSWORD={c} psql -h db -U app", c)
    c = d.password()
    add("curl-u", f"curl -u deploy:{c} https://ci.acme.internal/api/json", c)
    c = d.password()
    add("curl-user-long", f"curl --user admin:{c} -X POST https://acme.internal/api", c)
    c = d.chars(40)
    add("curl-bearer-header", f'curl -H "Authorization: Bearer {c}" https://api.acme.io/v1/me', c)
    c = d.password()
    add("sshpass", f"sshpass -p '{c}' ssh deploy@10.0.0.5", c)
    c = d.password()
    add("sshpass-bare", f"sshpass -p {c} scp build.tar deploy@host:/srv", c)
    c = d.password()
    add("docker-login-p", f"docker login -u deploy -p {c} registry.acme.io", c)
    c = d.password()
    add("docker-login-password", f"docker login --username deploy --password {c} ghcr.io", c)
    c = _b64(f"deploy:{d.password()}")
    add(
        "docker-config-auth",
        f'{{"auths": {{"registry.acme.io": {{"auth": "{c}"}}}}}}',
        c.rstrip("="),
    )
    c = d.password()
    add("netrc", f"machine api.heroku.com\n  login deploy@acme.io\n  password {c}", c)
    c = d.password()
    add("netrc-one-line", f"machine github.com login deploy password {c}", c)
    c = d.password(16, "!#%^*-_.~")
    add("pgpass", f"db.acme.internal:5432:app:app:{c}", c)
    c = d.password()
    add("openssl-pass", f"openssl pkcs12 -export -in cert.pem -out cert.p12 -passout pass:{c}", c)
    c = d.password()
    add("keytool-storepass", f"keytool -list -keystore app.jks -storepass {c}", c)
    c = d.password()
    add("redis-cli-a", f"redis-cli -h cache -a {c} ping", c)
    c = d.password()
    add("mongosh-password", f"mongosh --username app --password {c} mongodb://db/app", c)
    c = d.password()
    add("sqlcmd-P", f"sqlcmd -S sql01 -U sa -P {c} -Q 'select 1'", c)
    c = d.password()
    add("ldapsearch-w", f"ldapsearch -x -D cn=admin,dc=acme -w {c} -b dc=acme", c)
    c = d.password()
    add("smbclient-user-percent", f"smbclient //fs/share -U deploy%{c}", c)
    c = d.password()
    add("htpasswd-b", f"htpasswd -b -c .htpasswd admin {c}", c)
    c = d.password()
    add("git-credential-store", f"https://deploy:{c}@github.com", c)

    # --- HTTP headers, query strings, cookies ----------------------------------------------
    c = d.hex(40)
    add("authorization-bearer-hex", f"Authorization: Bearer {c}", c)
    c = d.chars(48, B64URL)
    add("authorization-bearer-opaque", f"authorization: bearer {c}", c)
    c = _b64(f"{d.word()}:{d.password()}")
    add("authorization-basic", f"Authorization: Basic {c}", c.rstrip("="))
    c = d.hex(40)
    add("authorization-token", f"Authorization: token {c}", c)
    c = d.chars(32)
    add("json-authorization-header", f'{{"Authorization": "Bearer {c}"}}', c)
    c = d.hex(32)
    add("x-api-key-header", f"X-Api-Key: {c}", c)
    c = d.hex(32)
    add("api-key-header", f"api-key: {c}", c)
    c = d.chars(32)
    add("x-auth-token-header", f"X-Auth-Token: {c}", c)
    c = d.hex(40)
    add("query-access-token", f"https://graph.acme.io/v2/me?access_token={c}&fields=id", c)
    c = d.hex(32)
    add("query-api-key", f"https://api.acme.io/v1/items?page=2&api_key={c}", c)
    c = d.chars(32)
    add("query-token", f"wss://push.acme.io/socket?token={c}", c)
    c = d.chars(32)
    add("query-client-secret", f"/oauth/token?client_id=web&client_secret={c}", c)
    c = d.chars(32)
    add("cookie-session", f"Cookie: sessionid={c}; csrftoken=abc", c)
    c = d.chars(40, B64URL)
    add("set-cookie", f"Set-Cookie: session={c}; Path=/; HttpOnly; Secure", c)

    # --- prose ------------------------------------------------------------------------------
    c = d.password()
    add("prose-password-is", f"The staging password is {c} until Friday.", c)
    c = d.password()
    add("prose-pw-colon", f"login with admin / pw: {c}", c)
    c = d.chars(40)
    add("prose-random-token", f"the session cookie is {c} (do not share)", c)
    c = d.chars(32)
    add("prose-api-key-is", f"Here is my API key: {c}", c)

    # --- personal data ---------------------------------------------------------------------
    name = d.chars(10, LOWER)
    add("email", f"{name}.{d.chars(8, LOWER)}@corp-{d.chars(6, LOWER)}.io", name)
    name = d.chars(12, LOWER)
    add("home-path-mac", f"/Users/{name}/Projects/app/.env", name)
    name = d.chars(12, LOWER)
    add("home-path-linux", f"/home/{name}/src/app/config.py", name)
    name = d.chars(12, LOWER)
    add("home-path-windows", f"C:\\Users\\{name}\\AppData\\Roaming\\app", name)
    return out


#: shared text holding a planted name: a config name and a workspace name are 100 characters at
#: most, so they carry one short secret each (the kinds below, cycled)
SHORT_KINDS = (
    "github-ghp",
    "aws-access-key-id",
    "env-db-pass",
    "x-api-key-header",
    "mailgun-key",
    "email",
    "authorization-bearer-hex",
    "yaml-db-password",
)


def short(planted: list[Planted], index: int) -> Planted:
    by_kind = {p.kind: p for p in planted}
    return by_kind[SHORT_KINDS[index % len(SHORT_KINDS)]]


# --- the leak check ------------------------------------------------------------------------

_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def readable(body: bytes | str) -> str:
    """A served body as a reader (or a script) gets it: HTML entities and JSON escapes undone,
    twice (JSON inside HTML, HTML inside JSON)."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    for _ in range(2):
        text = html.unescape(text)
        text = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
        text = text.replace("\\/", "/").replace('\\"', '"').replace("\\n", "\n")
    return text


def pieces(planted: Iterable[Planted]) -> dict[str, str]:
    """Every 12-character piece of every core (a shorter core whole), with its kind."""
    out: dict[str, str] = {}
    for item in planted:
        for core in item.cores:
            if len(core) <= PIECE:
                out[core] = item.kind
            for start in range(len(core) - PIECE + 1):
                out[core[start : start + PIECE]] = item.kind
    return out


def find_leaks(body: bytes | str, wanted: dict[str, str]) -> dict[str, str]:
    """{piece: kind} of every planted piece present in ``body``."""
    text = readable(body)
    found: dict[str, str] = {}
    lengths = sorted({len(p) for p in wanted})
    for length in lengths:
        for start in range(len(text) - length + 1):
            piece = text[start : start + length]
            kind = wanted.get(piece)
            if kind is not None and len(piece) == length:
                found[piece] = kind
    return found


def leak_report(leaks: dict[str, dict[str, str]], seed: int = SEED) -> str:
    """A failure message: which kinds leaked where (pieces shown: they are random test data)."""
    lines = [seed_note(seed)]
    for where, found in sorted(leaks.items()):
        kinds = sorted(set(found.values()))
        lines.append(f"{where}: {len(found)} pieces of {', '.join(kinds)}")
        lines.extend(f"    {kind}: {piece}" for piece, kind in list(found.items())[:5])
    return "\n".join(lines)


# --- the planted session -------------------------------------------------------------------

SESSION_ID = "5eed0000-0000-4000-8000-000000000000"
CWD = "/srv/acme/app"
VERSION = "2.1.39"
MODEL = "claude-sonnet-4-5-20250929"


class _Writer:
    """Writes conversation records as Claude Code does: one chain of uuids, timestamps, usage."""

    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []
        self.parent: str | None = None
        self.clock = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
        self.serial = 0
        self.context = 12_000

    def _uuid(self) -> str:
        self.serial += 1
        return f"5eed{self.serial:04x}-0000-4000-8000-{self.serial:012x}"

    def _envelope(self, kind: str) -> dict[str, object]:
        self.clock += timedelta(seconds=7)
        record: dict[str, object] = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": CWD,
            "sessionId": SESSION_ID,
            "version": VERSION,
            "gitBranch": "main",
            "type": kind,
            "uuid": self._uuid(),
            "timestamp": self.clock.isoformat().replace("+00:00", "Z"),
        }
        return record

    def add(self, record: dict[str, object]) -> str:
        self.records.append(record)
        self.parent = str(record["uuid"])
        return self.parent

    def user(self, content: object, **extra: object) -> None:
        record = self._envelope("user")
        record["message"] = {"role": "user", "content": content}
        record.update(extra)
        self.add(record)

    def assistant(self, blocks: list[dict[str, object]]) -> None:
        """One API response, one record per block (as Claude Code writes them)."""
        message_id = f"msg_01{self.serial:022d}"
        size = sum(len(json.dumps(b)) for b in blocks)
        self.context += 400 + size // 4
        for block in blocks:
            record = self._envelope("assistant")
            record["requestId"] = f"req_01{self.serial:022d}"
            record["message"] = {
                "model": MODEL,
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 3,
                    "cache_creation_input_tokens": 400 + size // 4,
                    "cache_read_input_tokens": self.context,
                    "output_tokens": 40 + size // 4,
                    "service_tier": "standard",
                },
            }
            self.add(record)


def _lines(planted: list[Planted], where: str) -> str:
    return "\n".join(f"[{where}] {p.kind}:\n{p.text}" for p in planted)


def _read_output(text: str) -> str:
    """A file as the Read tool returns it: numbered lines with an arrow."""
    return "\n".join(f"{n:>6}→{line}" for n, line in enumerate(text.splitlines(), start=1))


def planted_session(path: Path, planted: list[Planted]) -> Path:
    """A session, written from scratch, with every planted secret in the user's prompt, the
    assistant's text and thinking, tool_use input values and keys, tool results (a command's
    output, a file's contents from Read, a persisted preview and its full output), a compaction
    summary and the session's titles."""
    w = _Writer()
    file_text = "\n".join(p.text for p in planted)
    every = _lines(planted, "prompt")
    w.user(f"Our staging deploy fails. Here is everything I have, please check it:\n{every}")
    w.assistant(
        [
            {
                "type": "thinking",
                "thinking": "The user pasted credentials; I must not repeat them.\n"
                + _lines(planted, "thinking"),
                "signature": "EqQBCkYIBxgCKkB" + "A" * 40,
            },
            {"type": "text", "text": "Let me look at the config.\n" + _lines(planted, "reply")},
            {
                "type": "tool_use",
                "id": "toolu_01PLANTEDREAD00000000001",
                "name": "Read",
                "input": {"file_path": f"{CWD}/config/secrets.env"},
            },
        ]
    )
    w.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01PLANTEDREAD00000000001",
                "content": _read_output(file_text),
            }
        ],
        toolUseResult={
            "type": "text",
            "file": {
                "filePath": f"{CWD}/config/secrets.env",
                "content": file_text,
                "numLines": file_text.count("\n") + 1,
                "startLine": 1,
                "totalLines": file_text.count("\n") + 1,
            },
        },
    )
    # tool_use inputs: every secret in a command, and secrets as keys and values of the input
    as_keys = {p.text[:80]: "value" for p in planted if p.kind in SHORT_KINDS}
    w.assistant(
        [
            {
                "type": "tool_use",
                "id": "toolu_01PLANTEDBASH00000000002",
                "name": "Bash",
                "input": {
                    "command": "\n".join(p.text for p in planted),
                    "description": "try every credential",
                    "password": planted[0].text,
                    "env": {"API_TOKEN": planted[1].text, "db_password": planted[2].text},
                    **as_keys,
                },
            }
        ]
    )
    w.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01PLANTEDBASH00000000002",
                "content": "ran:\n" + _lines(planted, "output"),
            }
        ],
        toolUseResult={"stdout": "ran", "stderr": "", "interrupted": False, "isImage": False},
    )
    # a Write of the whole file, then a command whose output was persisted to disk
    w.assistant(
        [
            {
                "type": "tool_use",
                "id": "toolu_01PLANTEDWRITE0000000003",
                "name": "Write",
                "input": {"file_path": f"{CWD}/.env.production", "content": file_text},
            }
        ]
    )
    w.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01PLANTEDWRITE0000000003",
                "content": f"File created successfully at: {CWD}/.env.production",
            }
        ]
    )
    w.assistant(
        [
            {
                "type": "tool_use",
                "id": "toolu_01PLANTEDGREP00000000004",
                "name": "Bash",
                "input": {"command": "grep -rn '' /etc/acme", "description": "dump config"},
            }
        ]
    )
    full_output = ("padding line of the log\n" * 400) + _lines(planted, "persisted")
    preview_text = _lines(planted, "preview")
    w.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01PLANTEDGREP00000000004",
                "content": "<persisted-output>\nOutput too large (180KB). Full output saved to: "
                f"/root/.claude/projects/-srv-acme-app/{SESSION_ID}/tool-results/"
                "toolu_01PLANTEDGREP00000000004.txt\n\nPreview (first 2KB):\n"
                + preview_text
                + "\n...\n</persisted-output>",
            }
        ],
        toolUseResult={"stdout": full_output, "stderr": "", "interrupted": False, "isImage": False},
    )
    w.assistant([{"type": "text", "text": "Found them all; rotating now."}])
    # a compaction: the boundary, then the summary the model wrote
    boundary = w._envelope("system")
    last = w.parent
    boundary.update(
        {
            "parentUuid": None,
            "logicalParentUuid": last,
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "isMeta": False,
            "level": "info",
            "compactMetadata": {"trigger": "auto", "preTokens": 160_000},
        }
    )
    w.add(boundary)
    w.user(
        "This session is being continued from a previous conversation that ran out of context. "
        "The summary below covers the earlier portion of the conversation.\n\nSummary:\n"
        + _lines(planted, "summary")
        + "\nPlease continue the conversation from where we left it off.",
        isVisibleInTranscriptOnly=True,
        isCompactSummary=True,
    )
    w.assistant([{"type": "text", "text": "Continuing: " + _lines(planted, "after")}])
    w.user("thanks, " + _lines(planted, "last prompt"))
    w.assistant([{"type": "text", "text": "Done."}])
    titles = [
        {
            "type": "custom-title",
            "customTitle": "deploy " + _lines(planted, "title"),
            "sessionId": SESSION_ID,
        },
        {
            "type": "ai-title",
            "aiTitle": "fix " + _lines(planted, "ai title"),
            "sessionId": SESSION_ID,
        },
        {"type": "summary", "summary": "summary " + _lines(planted, "side"), "leafUuid": w.parent},
    ]
    w.records.extend(titles)
    path.write_text("".join(json.dumps(r) + "\n" for r in w.records))
    return path


def kinds(planted: list[Planted]) -> set[str]:
    return {p.kind for p in planted}


def by_kind(planted: list[Planted]) -> dict[str, Planted]:
    return {p.kind: p for p in planted}
