#!/usr/bin/env python3
"""Lists a crate's public API from its rustdoc JSON, one line per reachable public path.

Usage:
  RUSTC_BOOTSTRAP=1 cargo rustdoc -p reconcile-core --lib --features k8s-openapi/latest \
      -- -Z unstable-options --output-format json
  python3 scripts/public-api.py target/doc/reconcile_core.json > core.api

Two such listings, before and after a change, diffed line by line, show what the change did
to the API. Each line is `path kind signature`: modules, types, functions, constants, fields,
variants, inherent methods and the traits each type implements, reached from the crate root
through `pub mod` and `pub use` as a user would name them. Signatures are rendered from the
JSON's types (without spans or ids), so a move that keeps every path and type leaves the
listing unchanged, while a changed signature shows.

stable rustc emits rustdoc JSON only with RUSTC_BOOTSTRAP=1; the format is unstable, so this
reads only the parts that have stayed put for years (`index`, `paths`, `inner`).
"""

import json
import sys


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: public-api.py CRATE.json")
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    index, paths = doc["index"], doc["paths"]
    lines: set[str] = set()

    def name_of(id_) -> str:
        p = paths.get(str(id_))
        return "::".join(p["path"]) if p else f"#{id_}"

    def ty(t) -> str:
        if t is None:
            return "()"
        if not isinstance(t, dict):
            return str(t)
        (k, v), = t.items()
        if k == "resolved_path":
            args = v.get("args")
            return name_of(v["id"]).split("::")[-1] + generic_args(args)
        if k == "primitive":
            return v
        if k == "generic":
            return v
        if k == "borrowed_ref":
            return "&" + ("mut " if v.get("is_mutable") else "") + ty(v["type"])
        if k == "raw_pointer":
            return "*" + ty(v["type"])
        if k == "slice":
            return "[" + ty(v) + "]"
        if k == "array":
            return "[" + ty(v["type"]) + "; " + str(v["len"]) + "]"
        if k == "tuple":
            return "(" + ", ".join(ty(x) for x in v) + ")"
        if k == "impl_trait":
            return "impl " + " + ".join(bound(b) for b in v)
        if k == "dyn_trait":
            return "dyn " + " + ".join(name_of(t["trait"]["id"]).split("::")[-1] for t in v["traits"])
        if k == "qualified_path":
            return "<" + ty(v["self_type"]) + ">::" + v["name"]
        if k == "function_pointer":
            return "fn(..)"
        return k

    def generic_args(args) -> str:
        if not args:
            return ""
        if "angle_bracketed" in args:
            parts = []
            for a in args["angle_bracketed"].get("args", []):
                if isinstance(a, dict) and "type" in a:
                    parts.append(ty(a["type"]))
                elif isinstance(a, dict) and "lifetime" in a:
                    parts.append(a["lifetime"])
                else:
                    parts.append(str(a))
            return "<" + ", ".join(parts) + ">" if parts else ""
        return "(..)"

    def bound(b) -> str:
        if isinstance(b, dict) and "trait_bound" in b:
            return name_of(b["trait_bound"]["trait"]["id"]).split("::")[-1]
        return "'_"

    def fn_sig(f) -> str:
        sig = f["sig"]
        ins = ", ".join(f"{n}: {ty(t)}" for n, t in sig["inputs"])
        out = sig.get("output")
        return f"fn({ins})" + (f" -> {ty(out)}" if out else "")

    def emit(path: str, item) -> None:
        (kind, inner), = item["inner"].items() if isinstance(item["inner"], dict) else [(item["inner"], None)]
        sig = ""
        if kind == "function":
            sig = fn_sig(inner)
        elif kind in ("constant",):
            sig = ty(inner.get("type"))
        elif kind == "static":
            sig = ty(inner.get("type"))
        elif kind == "struct_field":
            sig = ty(inner)
        elif kind == "type_alias":
            sig = ty(inner.get("type"))
        lines.add(f"{path} {kind} {sig}".rstrip())

    seen: set[tuple[str, str]] = set()

    def walk(id_, path: str) -> None:
        item = index.get(str(id_))
        if item is None:
            # An item of another crate re-exported here: name it, don't walk it.
            lines.add(f"{path} reexport {name_of(id_)}")
            return
        if (str(id_), path) in seen:
            return
        seen.add((str(id_), path))
        inner = item["inner"]
        kind = next(iter(inner)) if isinstance(inner, dict) else inner
        if kind == "use":
            u = inner["use"]
            target = u.get("id")
            if target is None:
                lines.add(f"{path} use {u['source']}")
                return
            if u.get("is_glob"):
                titem = index.get(str(target))
                if titem and "module" in titem["inner"]:
                    for child in titem["inner"]["module"]["items"]:
                        c = index.get(str(child))
                        if c and c.get("visibility") == "public" and c.get("name"):
                            walk(child, f"{path.rsplit('::', 1)[0]}::{c['name']}")
                return
            walk(target, path)
            return
        emit(path, item)
        if kind == "module":
            for child in inner["module"]["items"]:
                c = index.get(str(child))
                if c is None or c.get("visibility") != "public":
                    continue
                cname = c.get("name")
                if "use" in c["inner"]:
                    u = c["inner"]["use"]
                    if u.get("is_glob"):
                        walk(child, f"{path}::*")
                    else:
                        walk(child, f"{path}::{u['name']}")
                elif cname:
                    walk(child, f"{path}::{cname}")
        elif kind == "struct":
            s = inner["struct"]
            kind_s = s["kind"]
            if isinstance(kind_s, dict) and "plain" in kind_s:
                for fid in kind_s["plain"]["fields"]:
                    f = index.get(str(fid))
                    if f and f.get("visibility") == "public":
                        emit(f"{path}.{f['name']}", f)
            elif isinstance(kind_s, dict) and "tuple" in kind_s:
                for i, fid in enumerate(kind_s["tuple"]):
                    if fid is not None:
                        f = index.get(str(fid))
                        if f and f.get("visibility") == "public":
                            emit(f"{path}.{i}", f)
            impls(s["impls"], path)
        elif kind == "enum":
            e = inner["enum"]
            for vid in e["variants"]:
                v = index[str(vid)]
                vk = v["inner"]["variant"]["kind"]
                lines.add(f"{path}::{v['name']} variant {json.dumps(vk) if isinstance(vk, str) else next(iter(vk))}")
                if isinstance(vk, dict) and "struct" in vk:
                    for fid in vk["struct"]["fields"]:
                        f = index[str(fid)]
                        emit(f"{path}::{v['name']}.{f['name']}", f)
            impls(e["impls"], path)
        elif kind == "union":
            impls(inner["union"]["impls"], path)
        elif kind == "trait":
            for mid in inner["trait"]["items"]:
                m = index[str(mid)]
                emit(f"{path}::{m['name']}", m)

    def impls(ids, path: str) -> None:
        for iid in ids:
            imp = index.get(str(iid))
            if imp is None:
                continue
            i = imp["inner"]["impl"]
            if i.get("is_synthetic") or i.get("blanket_impl") is not None:
                continue
            tr = i.get("trait")
            if tr is not None:
                lines.add(f"{path} impl {name_of(tr['id']).split('::')[-1]}{generic_args(tr.get('args'))}")
                continue
            for mid in i["items"]:
                m = index.get(str(mid))
                if m and m.get("visibility") == "public" and m.get("name"):
                    emit(f"{path}::{m['name']}", m)

    root = doc["root"]
    walk(root, index[str(root)]["name"])
    for line in sorted(lines):
        print(line)


if __name__ == "__main__":
    main()
