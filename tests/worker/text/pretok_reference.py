#!/usr/bin/env python3
"""pretok_reference.py DRIVER - checks the hand-written pre-tokenizers of
worker/text/encode.c against the reference regexes (as llama.cpp applies
them: one after the other over the chunks, unmatched text kept) run by the
Python `regex` module, on random strings.  Exit 77 when `regex` is absent.
"""
import random, subprocess, sys
try:
    import regex
except ImportError:
    sys.exit(77)
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
L3 = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
Q2 = L3.replace(r"\p{N}{1,3}", r"\p{N}")
dsl = [(0x41,0x5A),(0x61,0x7A),(0xB5,0xB5),(0xC0,0xD6),(0xD8,0xF6),(0xF8,0x1BA),(0x1BC,0x1BF),(0x1C4,0x293),(0x295,0x2AF),(0x370,0x373),(0x376,0x377),(0x37B,0x37D),(0x37F,0x37F),(0x386,0x386),(0x388,0x38A),(0x38C,0x38C),(0x38E,0x3A1),(0x3A3,0x3F5),(0x3F7,0x481),(0x48A,0x52F),(0x531,0x556),(0x10A0,0x10C5),(0x13A0,0x13F5),(0x13F8,0x13FD),(0x1C90,0x1CBA),(0x1CBD,0x1CBF),(0x1D00,0x1D2B),(0x1D6B,0x1D77),(0x1D79,0x1D9A),(0x1E00,0x1F15),(0x1F18,0x1F1D),(0x1F20,0x1F45),(0x1F48,0x1F4D),(0x1F50,0x1F57),(0x1F59,0x1F59),(0x1F5B,0x1F5B),(0x1F5D,0x1F5D),(0x1F5F,0x1F7D),(0x1F80,0x1FB4),(0x1FB6,0x1FBC),(0x1FBE,0x1FBE),(0x1FC2,0x1FC4),(0x1FC6,0x1FCC),(0x1FD0,0x1FD3),(0x1FD6,0x1FDB),(0x1FE0,0x1FEC),(0x1FF2,0x1FF4),(0x1FF6,0x1FFC),(0x2102,0x2102),(0x2107,0x2107),(0x210A,0x2113),(0x2115,0x2115),(0x2119,0x211D),(0x2124,0x2124),(0x2126,0x2126),(0x2128,0x2128),(0x212A,0x212D),(0x212F,0x2134),(0x2139,0x2139),(0x213C,0x213F),(0x2145,0x2149),(0x214E,0x214E),(0x2183,0x2184),(0x2C00,0x2C7B),(0x2C7E,0x2CE4),(0x2CEB,0x2CEE),(0x2CF2,0x2CF3),(0xA640,0xA66D),(0xA680,0xA69B),(0xA722,0xA76F),(0xA771,0xA787),(0xA78B,0xA78E),(0xAB70,0xABBF),(0xFB00,0xFB06),(0xFB13,0xFB17),(0xFF21,0xFF3A),(0xFF41,0xFF5A),(0x10400,0x1044F),(0x104B0,0x104D3),(0x104D8,0x104FB),(0x10C80,0x10CB2),(0x10CC0,0x10CF2),(0x118A0,0x118DF),(0x1E900,0x1E943)]
def cls(r): return "".join(regex.escape(chr(a)) + ("-" + regex.escape(chr(b)) if b != a else "") for a,b in r)
DSL = r"\s?[" + cls(dsl) + "]+"
DSLP = r"\s?[!-/:-~！-／：-～‘-‟　-。]+"
CJK = r"[一-龥ࠀ-一가-퟿]+"
PRES = {
 'default': [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
 'llama3': [L3], 'qwen2': [Q2],
 'deepseek-llm': [r"[\r\n]", DSL, DSLP, r"\s+\Z", CJK, r"\p{N}+"],
 'deepseek-coder': [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK, r"\p{N}"],
 'falcon': [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
 'gpt-2': [GPT2], 'starcoder': [r"\p{N}", GPT2],
 # llama.cpp's form of Mistral's tekken (llama-vocab.cpp)
 'tekken': [r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
}
def split(text, pats):
    offs = [len(text)]
    for p in pats:
        rx = regex.compile(p)
        new = []; start = 0
        for o in offs:
            sub = text[start:start+o]; si = 0
            for m in rx.finditer(sub):
                if m.start() > si: new.append(m.start() - si)
                new.append(m.end() - m.start()); si = m.end()
            if si < o: new.append(o - si)
            start += o
        offs = new
    ends = []; b = 0; i = 0
    for o in offs:
        b += len(text[i:i+o].encode()); i += o; ends.append(b)
    return ends
pool = list("abcXYZ   \n\n\r\t'sStTdDmMlLrReEvV0123456789!?.,;:-_()[]{}$+<=>^~|`\"#%&*/\\@") + \
  ["é","ß","Ω","ж","Ж","中","文","한","글","٣","½","²","\u00a0","\u3000","\u2009","😀","🦙","\u0301","™","€","—","‘","’","！","，","。","ａ","Ａ","ᾼ","K","\u200d","\ufe0f","ǅ","ⅷ"]
DRIVER = sys.argv[1]
random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
inputs = []
for _ in range(1500):
    n = random.randint(0, 24)
    inputs.append("".join(random.choice(pool) for _ in range(n)))
data = b"\0".join(s.encode() for s in inputs) + b"\0"
bad = 0
for pre, pats in PRES.items():
    out = subprocess.run([DRIVER, pre], input=data, capture_output=True, check=True).stdout.decode().split("\n")
    nb = 0
    for s, line in zip(inputs, out):
        got = [int(x) for x in line.split()]
        want = split(s, pats)
        if got != want:
            nb += 1
            if nb <= 3: print(pre, repr(s), "\n  want", want, "\n  got ", got)
    print(pre, "mismatches:", nb, "/", len(inputs)); bad += nb
sys.exit(1 if bad else 0)
