"""Checks that every code block of one language in a document is a
verbatim excerpt of one of the given source files, so the document cannot
drift from code a test builds or runs.

usage: doc_excerpts.py DOC LANG[,LANG...] SOURCE... (exit 1 naming the block)"""
import re
import sys

doc_path, langs, paths = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
with open(doc_path) as f:
    doc = f.read()
sources = []
for p in paths:
    with open(p) as f:
        sources.append(f.read())
pattern = r"```(?:%s)\n(.*?)```" % "|".join(map(re.escape, langs))
blocks = re.findall(pattern, doc, re.S)
if not blocks:
    sys.exit("FAIL: %s has no %s code block" % (doc_path, "/".join(langs)))
for b in blocks:
    if not any(b in s for s in sources):
        sys.exit("FAIL: %s: a code block is not an excerpt of the examples:\n%s" % (doc_path, b))
print("%s: %d code block(s), each quoted from the examples" % (doc_path, len(blocks)))
