import json, sys, time, urllib.request, re, random
# thrash.py URL LOG NUMCTX SEED_ADMIN(0/1) NS: a memory-rich namespace, 10 short turns of whole words.
url, log, numctx, seed, ns = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
words = ["hello", "world", "the", "you", "is", "are", "how", "what", "sky", "blue", "tiny", "test", "model", "am", "a"]
rnd = random.Random(7)
def post(path, obj, hdr={}):
    req = urllib.request.Request(url + path, json.dumps(obj).encode(), {"Content-Type": "application/json", **hdr})
    with urllib.request.urlopen(req) as r: return json.load(r), r.headers
if seed:
    for i in range(80):
        post("/memories", {"namespace": ns, "text": " ".join(rnd.choice(words) for _ in range(30)) + f" {i}"})
def lines():
    with open(log, errors="replace") as f: return f.read().splitlines()
hist, rows = [], []
for t in range(1, 11):
    hist.append({"role": "user", "content": " ".join(rnd.choice(words) for _ in range(8))})
    before = len(lines())
    out, h = post("/api/chat", {"model": "tiny", "stream": False, "messages": hist, "options": {"num_ctx": numctx}},
                  {"X-OpenWebUI-User-Id": ns, "X-OpenWebUI-Chat-Id": "t-" + ns})
    hist.append({"role": "assistant", "content": out["message"]["content"]})
    time.sleep(0.4)
    new = lines()[before:]
    slot = [l for l in new if "loading cache slot" in l]
    pec = out.get("prompt_eval_count")
    ms = [re.search(r"prompt=(\d+) used=(\d+) remaining=(-?\d+)", l) for l in slot]
    ms = [x for x in ms if x and int(x.group(1)) == pec]
    m = ms[-1] if ms else None
    rows.append({"turn": t, "prompt": out.get("prompt_eval_count"), "evaluated": int(m.group(3)) if m else None,
                 "truncated": sum(1 for l in new if "truncating input" in l), "ctx": h.get("X-Vera-Context", "")})
print(json.dumps(rows))
