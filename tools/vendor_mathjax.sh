#!/usr/bin/env bash
# Vendor MathJax from the npm registry into book/_static/mathjax/, so the built book renders
# math with no internet access (no CDN). Run from anywhere; commit what it writes.
#
#   tools/vendor_mathjax.sh            # the pinned version below
#   tools/vendor_mathjax.sh 3.2.2      # another 3.x release
#
# What is kept (MathJax 3's browser build, es5/):
#   tex-svg.js                  TeX input + SVG output in one file. SVG output draws glyphs as
#                               paths, so it needs no web fonts (CHTML output would need woff files).
#   input/tex/extensions/*.js   TeX packages that tex-svg.js loads on demand (\boldsymbol,
#                               \cancel, \color, ...) from the folder it was loaded from.
#   LICENSE                     Apache-2.0, MathJax's licence.
#   VERSION                     the package, its version and npm's integrity hash.
# Everything else in the package (CHTML fonts, the speech rule engine, the MathML inputs, ...)
# is left out: about 2.7 MB kept of 24 MB.
#
# _config.yml points Sphinx at it: sphinx.config.mathjax_path: mathjax/tex-svg.js, with
# book/_static in html_static_path.
set -euo pipefail

version="${1:-3.2.2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/book/_static/mathjax"

command -v npm >/dev/null || { echo "npm is needed (apt-get install npm, or Node.js from nodejs.org)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --json "mathjax@$version" >pack.json && tar -xzf "mathjax-$version.tgz")
integrity="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["integrity"])' "$tmp/pack.json")"

es5="$tmp/package/es5"
test -f "$es5/tex-svg.js" || { echo "mathjax@$version has no es5/tex-svg.js (MathJax 3.x is expected)" >&2; exit 1; }

rm -rf "$dest"
mkdir -p "$dest/input/tex"
cp "$es5/tex-svg.js" "$dest/"
cp -r "$es5/input/tex/extensions" "$dest/input/tex/"
cp "$tmp/package/LICENSE" "$dest/"
printf 'mathjax@%s from the npm registry (%s), es5/ build, copied by tools/vendor_mathjax.sh\n' \
    "$version" "$integrity" >"$dest/VERSION"

echo "vendored mathjax@$version into ${dest#"$root"/} ($(du -sh "$dest" | cut -f1))"
