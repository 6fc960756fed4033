"""Who a site is: its greeting signed with its SuperNode's key, checked against the run's list of sites.

A site signs its greeting (its name, size, guarantee and the coordinator's one-time
``nonce``) with the private key of its SuperNode (an OpenSSH EC key on a NIST curve, the
one registered with ``flwr supernode register``); the coordinator checks it against the
public key its list of sites gives for that name (`check_greeting`). A node that cannot
sign as a listed site is refused, whatever its node id. The keys are read with
``cryptography`` (a dependency of Flower). docs/federation.md, "Known sites".
"""
from __future__ import annotations

import base64
import hashlib
import json

__all__ = ["check_greeting", "fingerprint", "identify", "load_private_key", "public_key_text", "read_sites", "sign",
           "signed_part"]

#: The greeting's fields a signature covers (with the coordinator's nonce).
SIGNED = ("name", "n", "d", "k", "index", "guarantee", "settings", "nonce")


def load_private_key(path: str):
    """The site's private key from an OpenSSH file (``ssh-keygen -t ecdsa -b 384``, no passphrase).

    Parameters
    ----------
    path : str
        The key file (the SuperNode's ``--auth-supernode-private-key``).
    """
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key

    try:
        with open(path, "rb") as fh:
            key = load_ssh_private_key(fh.read(), None)
    except (OSError, ValueError) as exc:
        raise ValueError(f"key {path}: cannot read an OpenSSH private key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"key {path}: an EC key is needed (ssh-keygen -t ecdsa -b 384), got {type(key).__name__}")
    return key


def public_key_text(key) -> str:
    """The OpenSSH public line (``ecdsa-sha2-nistp384 AAAA...``) of a private or public key.

    Parameters
    ----------
    key : EllipticCurvePrivateKey or EllipticCurvePublicKey
    """
    from cryptography.hazmat.primitives import serialization

    pub = key.public_key() if hasattr(key, "public_key") else key
    return pub.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def fingerprint(public: str) -> str:
    """A short name for a public key: ``SHA256:`` and the first 16 base64 characters of its digest.

    Parameters
    ----------
    public : str
        An OpenSSH public line.
    """
    parts = public.split()
    blob = base64.b64decode(parts[1]) if len(parts) > 1 else public.encode()
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode()[:16]


def signed_part(greeting: dict) -> bytes:
    """The bytes a greeting's signature covers: its `SIGNED` fields as canonical JSON.

    Parameters
    ----------
    greeting : dict
        A site's greeting (with the coordinator's ``nonce``).
    """
    return json.dumps({k: greeting.get(k) for k in SIGNED}, sort_keys=True).encode()


def sign(key, greeting: dict) -> str:
    """The base64 ECDSA (SHA-256) signature of a greeting's `signed_part`.

    Parameters
    ----------
    key : EllipticCurvePrivateKey
    greeting : dict
    """
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    return base64.b64encode(key.sign(signed_part(greeting), ec.ECDSA(hashes.SHA256()))).decode()


def read_sites(sites) -> dict:
    """The run's list of sites, checked: ``{name: OpenSSH public line}``.

    Parameters
    ----------
    sites : list of dict or str
        ``[{"name": "a", "public_key": "ecdsa-sha2-nistp384 AAAA..."}, ...]``, or that list as JSON text.
    """
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    if isinstance(sites, str):
        try:
            sites = json.loads(sites)
        except ValueError as exc:
            raise ValueError(f"sites: not JSON ({exc})") from None
    if not isinstance(sites, list) or not sites:
        raise ValueError(f"sites must list the run's sites, each {{'name': ..., 'public_key': ...}}, got {sites!r}")
    out: dict = {}
    for i, s in enumerate(sites):
        if not isinstance(s, dict) or set(s) != {"name", "public_key"} or not isinstance(s["name"], str):
            raise ValueError(f"sites[{i}] must be {{'name': str, 'public_key': str}}, got {s!r}")
        try:
            key = load_ssh_public_key(str(s["public_key"]).encode())
        except (ValueError, TypeError) as exc:
            raise ValueError(f"sites[{i}] ({s['name']}): public_key is not an OpenSSH public key ({exc})") from None
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise ValueError(f"sites[{i}] ({s['name']}): public_key must be an EC key, got {type(key).__name__}")
        if s["name"] in out:
            raise ValueError(f"sites: the name {s['name']!r} is listed twice")
        out[s["name"]] = s["public_key"]
    if len(set(out.values())) != len(out):
        raise ValueError("sites: two sites share a public key")
    return out


def check_greeting(greeting: dict, sites: dict, nonce: str) -> str | None:
    """Why a greeting does not come from a listed site (None when it does).

    Parameters
    ----------
    greeting : dict
        A node's reply to the coordinator's hello.
    sites : dict
        `read_sites`'s ``{name: public line}``.
    nonce : str
        The coordinator's nonce of this run's hello.
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    name = greeting.get("name")
    if name not in sites:
        return f"its name {name!r} is not one of the run's sites ({', '.join(sorted(sites))})"
    if greeting.get("nonce") != nonce:
        return f"it claims site {name!r} but answers another hello (nonce)"
    public = load_ssh_public_key(sites[name].encode())
    try:
        if not isinstance(public, ec.EllipticCurvePublicKey):
            raise ValueError
        signature = base64.b64decode(str(greeting.get("signature", "")), validate=True)
        public.verify(signature, signed_part(greeting), ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return f"it claims site {name!r} but its signature does not verify with that site's key " \
               f"({fingerprint(sites[name])})"
    return None


def identify(greetings: dict, sites: dict, nonce: str) -> tuple[dict, dict]:
    """Which node is which listed site: ``({name: node}, {node: why refused})``.

    A node is taken for a site only when its greeting verifies with that site's key
    (`check_greeting`); a second node that proves the same name is refused too (both
    cannot hold the key unless it leaked).

    Parameters
    ----------
    greetings : dict
        ``{node: greeting}``, each node's reply to this run's hello.
    sites : dict
        `read_sites`'s ``{name: public line}``.
    nonce : str
        The hello's nonce.
    """
    found: dict = {}
    refused: dict = {}
    for node, greeting in greetings.items():
        why = (f"it refused the hello: {greeting['refused']}" if "refused" in greeting
               else check_greeting(greeting, sites, nonce))
        if why is None and greeting["name"] in found:
            why = f"site {greeting['name']!r} is already node {found[greeting['name']]}"
        if why is None:
            found[greeting["name"]] = node
        else:
            refused[node] = why
    return found, refused
