import json, sys, time, urllib.request, os, re
# drive.py URL LOG TURNS NUMCTX GAP [ns] [chat]: a chat of ordinary English; per turn: prompt_eval_count,
# the runner's cache use (prompt=, used=) and any truncation lines Ollama logged for it.
# With HIST=file the chat is kept there after each turn and resumed from it (a restart between two runs).
url, log, turns, numctx, gap = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
ns = sys.argv[6] if len(sys.argv) > 6 else "alice"
chat = "c-" + ns + (sys.argv[7] if len(sys.argv) > 7 else "")
sents = ["I spent the morning walking along the river with my sister and we talked about her new job in the city.",
 "The weather was cold but the sun came out in the afternoon, so we sat on a bench and watched the boats.",
 "She told me that her manager is kind but the work is harder than she expected and the hours are long.",
 "Later we had lunch at a small cafe near the bridge where they serve soup and fresh bread every day.",
 "In the evening I read a few chapters of a novel about a family that moves to a farm in the mountains.",
 "Tomorrow I plan to fix the bicycle, clean the kitchen and call my parents to ask about their trip."]
hist, saved = [], os.environ.get("HIST")
if saved and os.path.exists(saved):
    with open(saved) as f: hist = json.load(f)
first = sum(1 for m in hist if m["role"] == "user") + 1
def lines():
    try:
        with open(log, errors="replace") as f: return f.read().splitlines()
    except FileNotFoundError: return []
rows = []
for t in range(first, turns+1):
    text = f"Turn {t}. " + " ".join(sents[(t+k) % len(sents)] for k in range(2))
    if t == turns and os.environ.get("FINAL"): text = os.environ["FINAL"]
    if t == 2: text = "My locker code is 4417. " + text
    hist.append({"role": "user", "content": text})
    before = len(lines())
    body = json.dumps({"model": "tiny", "stream": False, "messages": hist, "options": {"num_ctx": numctx}}).encode()
    req = urllib.request.Request(url + "/api/chat", body, {"Content-Type": "application/json", "X-OpenWebUI-User-Id": ns, "X-OpenWebUI-Chat-Id": chat})
    with urllib.request.urlopen(req) as r:
        out = json.load(r); ctx = r.headers.get("X-Vera-Context", "")
    hist.append({"role": "assistant", "content": out["message"]["content"]})
    if saved:
        with open(saved, "w") as f: json.dump(hist, f)
    time.sleep(0.3)
    new = lines()[before:]
    trunc = [l for l in new if "truncating input" in l]
    slot = [l for l in new if "loading cache slot" in l]
    pec = out.get("prompt_eval_count")
    ms = [re.search(r"prompt=(\d+) used=(\d+) remaining=(-?\d+)", l) for l in slot]
    ms = [x for x in ms if x and int(x.group(1)) == pec]
    m = ms[-1] if ms else None
    rows.append({"turn": t, "prompt_eval_count": out.get("prompt_eval_count"), "evaluated": int(m.group(3)) if m else None,
                 "cached": int(m.group(2)) if m else None, "truncated": len(trunc), "ctx": ctx, "mem": r.headers.get("X-Vera-Memories", ""),
                 "trunc_lines": [re.sub(r'^.*msg=', '', l)[:120] for l in trunc]})
    time.sleep(gap)
print(json.dumps(rows))
