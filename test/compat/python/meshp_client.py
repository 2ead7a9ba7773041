"""A meshp agent's protocol side written from proto/meshp/v1/control.proto and its comments alone.

Nothing here is taken from the TypeScript code: the token format, the TLS pin, the challenge
signature, the delta rules and the state hash are what the proto's comments say. The stubs are
generated from the proto at test time (protoc with grpc_python_plugin) into STUBS, given on the command line.

Every event is one JSON line on stdout; the test reads them.

  meshp_client.py follow  --stubs DIR --state DIR --controller HOST:PORT [--token T --name N]
      enrols (when STATE holds no enrolment) or resumes, follows the delta stream, applies every
      delta, computes the state hash, checks it against StateDelta.state_hash and acks it; on stdin
      'resync' asks for a snapshot, 'quit' ends the stream. Ends when the controller ends the stream.
  meshp_client.py probe   --stubs DIR --state DIR --controller HOST:PORT --token T --used-token U
      the refusals: a replayed token, this node's key under another name, a hello signed with
      another key, bytes that are not a SyncRequest, a version claimed without its signature.
"""
import argparse
import base64
import hashlib
import json
import os
import queue
import socket
import ssl
import sys
import threading

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def say(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


# ---- the token and the TLS pin (EnrolRequest.token) ------------------------------------------

def decode_token(token):
    prefix, claims, _secret = token.strip().split(".")
    assert prefix == "meshp1", "not a meshp1 token"
    pad = "=" * (-len(claims) % 4)
    c = json.loads(base64.urlsafe_b64decode(claims + pad))
    return {"network": c["n"], "adopted": c["a"], "fingerprint": c["f"]}


def pinned_certificate(address, fingerprint):
    """The certificate the controller presents, accepted only when its SHA-256 (DER) is the pin."""
    host, port = address.rsplit(":", 1)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with ctx.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    got = hashlib.sha256(der).hexdigest()
    if got != fingerprint.replace(":", "").lower():
        raise SystemExit(f"MESHP_TLS_PIN: the controller presents {got}, not the pinned {fingerprint}")
    return ssl.DER_cert_to_PEM_cert(der).encode()


# ---- the state hash (control.proto, "The state hash") ----------------------------------------

def canonical(value):
    """Proto3 defaults left out, keys sorted later by json.dumps; None: nothing left."""
    if value is None or value == "" or value is False or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0):
        return None
    if isinstance(value, list):
        if not value:
            return None
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            c = canonical(v)
            if c is not None:
                out[k] = c
        return out or None
    return value


def canonical_json(value):
    c = canonical(value)
    if c is None:
        return "{}"
    return json.dumps(c, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class View:
    COMPONENTS = ["dns", "filter", "route_groups", "relays", "tunnel", "declaration"]

    def __init__(self, pb):
        self.pb = pb
        self.version = 0
        self.network = ""
        self.peers = {}  # id -> Peer
        self.components = {n: None for n in self.COMPONENTS}  # None: never held
        self.signature = b""

    def to_dict(self, msg):
        from google.protobuf.json_format import MessageToDict
        return MessageToDict(msg, use_integers_for_enums=True)

    def hash(self):
        total = 0
        for p in self.peers.values():
            total = (total + int(sha256_hex(canonical_json(self.to_dict(p))), 16)) % (1 << 256)
        comps = ["-" if c is None else sha256_hex(canonical_json(self.to_dict(c))) for c in (self.components[n] for n in self.COMPONENTS)]
        return sha256_hex(canonical_json({"components": comps, "count": len(self.peers), "peers": format(total, "064x"), "v": 1}))

    def apply(self, d):
        """Returns what changed, or raises Gap (the agent then asks for a snapshot)."""
        removed, unscoped, upserted = [], [], []
        if d.from_version == 0:
            before = set(self.peers)
            self.peers = {}
            self.components = {n: None for n in self.COMPONENTS}
            for p in d.upsert_peers:
                self.peers[p.id] = p
            removed = sorted(before - set(self.peers))
            upserted = [p.id for p in d.upsert_peers]
        else:
            if d.from_version != self.version:
                raise Gap(f"delta {d.from_version}->{d.to_version} does not follow {self.version}")
            for r in d.remove_peers:
                if r.id in self.peers:
                    del self.peers[r.id]
                    reason = self.pb.RemovalReason.Name(r.reason)
                    if reason == "REMOVAL_REASON_REMOVED":
                        removed.append(r.id)
                    elif reason == "REMOVAL_REASON_UNSCOPED":
                        unscoped.append(r.id)
                    else:
                        raise Gap(f"removal reason {r.reason} not known")
            for p in d.upsert_peers:
                self.peers[p.id] = p
                upserted.append(p.id)
        for n in self.COMPONENTS:
            if d.HasField(n):
                self.components[n] = getattr(d, n)
        self.version = d.to_version
        if d.network:
            self.network = d.network
        self.signature = d.version_signature
        return {"removed": removed, "unscoped": unscoped, "upserted": upserted}

    def save(self, path):
        doc = {
            "version": self.version, "network": self.network, "signature": base64.b64encode(self.signature).decode(),
            "peers": [base64.b64encode(p.SerializeToString()).decode() for p in self.peers.values()],
            "components": {n: (None if c is None else base64.b64encode(c.SerializeToString()).decode()) for n, c in self.components.items()},
        }
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f)
        os.replace(path + ".tmp", path)

    def load(self, path):
        with open(path) as f:
            doc = json.load(f)
        self.version, self.network, self.signature = doc["version"], doc["network"], base64.b64decode(doc["signature"])
        for raw in doc["peers"]:
            p = self.pb.Peer.FromString(base64.b64decode(raw))
            self.peers[p.id] = p
        types = {"dns": self.pb.Dns, "filter": self.pb.Filter, "route_groups": self.pb.RouteGroups, "relays": self.pb.Relays, "tunnel": self.pb.Tunnel, "declaration": self.pb.Declaration}
        for n, raw in doc["components"].items():
            self.components[n] = None if raw is None else types[n].FromString(base64.b64decode(raw))


class Gap(Exception):
    pass


# ---- the node: its key, its enrolment ----------------------------------------------------------

class Node:
    def __init__(self, state):
        self.state = state
        os.makedirs(state, exist_ok=True)
        key_file = os.path.join(state, "node.key")
        if os.path.exists(key_file):
            with open(key_file, "rb") as f:
                self.key = serialization.load_pem_private_key(f.read(), password=None)
        else:
            self.key = Ed25519PrivateKey.generate()
            with open(key_file, "wb") as f:
                f.write(self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        self.enrolment = None
        e = os.path.join(state, "enrolment.json")
        if os.path.exists(e):
            with open(e) as f:
                self.enrolment = json.load(f)

    @property
    def node_key(self):
        """EnrolRequest.node_key: the Ed25519 public key, SPKI DER, base64."""
        der = self.key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return base64.b64encode(der).decode()

    def save_enrolment(self, e):
        self.enrolment = e
        with open(os.path.join(self.state, "enrolment.json"), "w") as f:
            json.dump(e, f)


def challenge_payload(node, nonce):
    return b"meshp-sync-v1\x00" + node.encode("utf-8") + b"\x00" + nonce


def refusal(err):
    """A gRPC error's MESHP code (the status details begin with it)."""
    details = err.details() or ""
    return {"code": details.split(":", 1)[0], "message": details, "status": err.code().name}


# ---- the channel --------------------------------------------------------------------------------

def channel(grpc, address, fingerprint):
    pem = pinned_certificate(address, fingerprint)
    creds = grpc.ssl_channel_credentials(root_certificates=pem)
    # The certificate is pinned by its fingerprint; its names include 127.0.0.1 and localhost.
    return grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override", "localhost")])


def enrol(grpc, pb, stub, node, token, name):
    try:
        r = stub.Enrol(pb.EnrolRequest(token=token, node_key=node.node_key, node=name, endpoints=[]), timeout=15)
    except grpc.RpcError as err:
        return None, refusal(err)
    return {"network": r.network, "node": r.node, "credential": r.credential, "mode": r.mode, "addresses": list(r.addresses)}, None


def sync(grpc, pb, stub, hello, on_message, outbox):
    """Opens Sync: answers the challenge with `hello(nonce)`, then hands each message to on_message;
    `outbox` (a Queue) carries what to send next, None ends the stream. Returns how it ended."""
    def requests():
        while True:
            m = outbox.get()
            if m is None:
                return
            yield m

    call = stub.Sync(requests())
    errors = []
    try:
        for m in call:
            kind = m.WhichOneof("message")
            if kind == "challenge":
                outbox.put(pb.SyncRequest(hello=hello(m.challenge.nonce)))
            elif kind == "error":
                errors.append({"code": m.error.code, "message": m.error.message})
            else:
                on_message(m.delta)
        return {"errors": errors, "code": "", "status": "OK"}
    except grpc.RpcError as err:
        return {"errors": errors, **refusal(err)}
    finally:
        outbox.put(None)


def follow(grpc, pb, pbg, args):
    node = Node(args.state)
    view = View(pb)
    view_file = os.path.join(args.state, "view.json")
    fingerprint = decode_token(args.token)["fingerprint"] if args.token else node.enrolment["fingerprint"]
    ch = channel(grpc, args.controller, fingerprint)
    control = pbg.ControlServiceStub(ch)
    if node.enrolment is None:
        e, refused = enrol(grpc, pb, control, node, args.token, args.name)
        if refused:
            say("refused", stage="enrol", **refused)
            return 1
        e["fingerprint"] = fingerprint
        node.save_enrolment(e)
        say("enrolled", network=e["network"], node=e["node"], mode=e["mode"], addresses=e["addresses"])
    elif os.path.exists(view_file):
        view.load(view_file)
    e = node.enrolment
    outbox = queue.Queue()
    pending = []  # parts of a delta sent in several messages

    def hello(nonce):
        sig = node.key.sign(challenge_payload(e["node"], nonce))
        say("hello", applied_version=view.version, state_hash=view.hash())
        return pb.Hello(node=e["node"], credential=e["credential"], applied_version=view.version, state_hash=view.hash(),
                        revision=2, signature=sig, version_signature=view.signature)

    def on_delta(d):
        if d.HasField("part") and d.part.count > 1:
            if d.part.index != len(pending):
                pending.clear()
                outbox.put(pb.SyncRequest(resync=pb.ResyncRequest(applied_version=view.version, reason=pb.RESYNC_REASON_GAP, detail="a part out of order")))
                return
            pending.append(d)
            if d.part.index < d.part.count - 1:
                return
            whole = pb.StateDelta()
            whole.CopyFrom(pending[0])
            for p in pending[1:]:
                whole.upsert_peers.extend(p.upsert_peers)
                whole.remove_peers.extend(p.remove_peers)
            whole.state_hash, whole.version_signature = d.state_hash, d.version_signature
            whole.ClearField("part")
            pending.clear()
            d = whole
        if d.from_version != 0 and d.to_version <= view.version:
            return  # already applied
        try:
            change = view.apply(d)
        except Gap as g:
            say("gap", detail=str(g))
            outbox.put(pb.SyncRequest(resync=pb.ResyncRequest(applied_version=view.version, reason=pb.RESYNC_REASON_GAP, detail=str(g))))
            return
        h = view.hash()
        view.save(view_file)
        outbox.put(pb.SyncRequest(ack=pb.StateAck(applied_version=view.version, state_hash=h)))
        say("applied", from_version=d.from_version, to_version=d.to_version, snapshot=d.from_version == 0, hash=h, expected=d.state_hash,
            match=h == d.state_hash, signed=len(d.version_signature) in (32, 64), peers=sorted(view.peers), **change)

    def commands():
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "resync":
                outbox.put(pb.SyncRequest(resync=pb.ResyncRequest(applied_version=view.version, reason=pb.RESYNC_REASON_STORE, detail="asked by the test")))
            elif cmd == "quit":
                outbox.put(None)
                return

    threading.Thread(target=commands, daemon=True).start()
    end = sync(grpc, pb, control, hello, on_delta, outbox)
    say("closed", **end)
    return 0


def probe(grpc, pb, pbg, args):
    node = Node(args.state)
    e = node.enrolment
    ch = channel(grpc, args.controller, e["fingerprint"])
    control = pbg.ControlServiceStub(ch)
    out = {}
    # A token used once already.
    _, out["replayed_token"] = enrol(grpc, pb, control, Node(os.path.join(args.state, "other")), args.used_token, "py-replay")
    # This node's key under another name, with a fresh token.
    _, out["key_in_use"] = enrol(grpc, pb, control, node, args.token, e["node"] + "-twin")
    # A hello signed with a key that is not the enrolled one.
    stranger = Ed25519PrivateKey.generate()
    end = sync(grpc, pb, control, lambda nonce: pb.Hello(node=e["node"], credential=e["credential"], revision=2,
               signature=stranger.sign(challenge_payload(e["node"], nonce))), lambda d: None, queue.Queue())
    out["foreign_signature"] = end
    # A version far past the network's, without the controller's signature for it.
    end = sync(grpc, pb, control, lambda nonce: pb.Hello(node=e["node"], credential=e["credential"], revision=2, applied_version=4294967295,
               state_hash="0" * 64, signature=node.key.sign(challenge_payload(e["node"], nonce))), lambda d: None, queue.Queue())
    out["unproven_version"] = end
    # Bytes that are not a SyncRequest.
    raw = ch.stream_stream("/meshp.v1.ControlService/Sync", request_serializer=lambda b: b, response_deserializer=lambda b: b)
    try:
        for _ in raw(iter([bytes([0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x01])])):
            pass
        out["garbage"] = {"code": "", "status": "OK"}
    except grpc.RpcError as err:
        out["garbage"] = refusal(err)
    say("probed", **out)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["follow", "probe"])
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--controller", required=True)
    ap.add_argument("--token")
    ap.add_argument("--used-token")
    ap.add_argument("--name")
    args = ap.parse_args()
    sys.path.insert(0, args.stubs)
    import grpc
    from meshp.v1 import control_pb2 as pb, control_pb2_grpc as pbg
    return (follow if args.command == "follow" else probe)(grpc, pb, pbg, args)


if __name__ == "__main__":
    sys.exit(main())
