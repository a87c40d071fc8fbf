package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromiumPath finds a Chromium to drive, "" when there is none.
func chromiumPath() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one headless Chromium tab. Every step runs under its own
// deadline, so a page that never gets where the test waits fails the test
// instead of hanging it.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// watchProblems runs in the page before its own script: it records CSP
// violations and uncaught errors, which the test then asserts are none.
const watchProblems = `
window.__veraProblems = [];
document.addEventListener('securitypolicyviolation', (e) => window.__veraProblems.push('CSP ' + e.violatedDirective + ' ' + e.blockedURI));
window.addEventListener('error', (e) => window.__veraProblems.push('error: ' + e.message));
window.addEventListener('unhandledrejection', (e) => window.__veraProblems.push('unhandled rejection: ' + String(e.reason)));
`

func newBrowser(t *testing.T, bin string, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-gpu", true),
		// This machine's network is closed: without these Chromium keeps
		// trying to reach Google's hosts.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	opts = append(opts, extra...)
	// A Chromium that exits before it listens (seen once in CI, on a
	// loaded machine: "chrome failed to start") is given one more try,
	// with a fresh profile; a browser that cannot start twice fails the
	// test.
	var ctx context.Context
	var err error
	for try := range 2 {
		if try > 0 {
			t.Logf("Chromium did not start (%v); trying once more", err)
			opts = append(opts, chromedp.UserDataDir(t.TempDir()))
		}
		ctx, err = startBrowser(t, opts)
		if err == nil {
			break
		}
	}
	require.NoError(t, err, "starting Chromium at %s", bin)
	_, err = chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchProblems})
	require.NoError(t, err)
	return &browser{t: t, ctx: ctx}
}

// startBrowser starts one Chromium with opts, stopped when the test ends.
func startBrowser(t *testing.T, opts []chromedp.ExecAllocatorOption) (context.Context, error) {
	// The browser lives as long as the context of its first Run: give the
	// whole session a deadline, and each step a shorter one below.
	life, stop := context.WithTimeout(context.Background(), 3*time.Minute)
	alloc, cancelAlloc := chromedp.NewExecAllocator(life, opts...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
		stop()
	})
	return ctx, chromedp.Do(ctx)
}

// do runs steps with a deadline.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...), what)
}

// until waits for a JavaScript condition to hold.
func (b *browser) until(what, js string) {
	b.t.Helper()
	b.do(what, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(0)))
}

// evalJS evaluates a JavaScript expression into T.
func evalJS[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	require.NoError(b.t, err, js)
	return v
}

// set sets the value of a form field. (chromedp's SetValue cannot set
// an empty value: it reads the value back and takes "" for a failure.)
func (b *browser) set(sel, value string) {
	b.t.Helper()
	sj, _ := json.Marshal(sel)
	vj, _ := json.Marshal(value)
	require.True(b.t, evalJS[bool](b, fmt.Sprintf(`((e) => { e.value = %s; return e.value === %s; })(document.querySelector(%s))`, vj, vj, sj)), "set %s", sel)
}

// loads is how many times the memory list has finished loading.
func (b *browser) loads() int {
	n, _ := strconv.Atoi(evalJS[string](b, `document.getElementById('memory-list').dataset.loads || '0'`))
	return n
}

// show submits the memory filter form with Enter in the search box and
// waits for the list to load.
func (b *browser) show(ns, q string) {
	b.t.Helper()
	n := b.loads()
	b.set("#ns", ns)
	b.set("#q", "")
	b.do("filter "+ns+" "+q, chromedp.SendKeys(chromedp.ID("q"), q+"\r"))
	b.until("the list loads", fmt.Sprintf(`+document.getElementById('memory-list').dataset.loads > %d`, n))
}

func memSel(id, rest string) string { return fmt.Sprintf(`#memory-list li[data-id=%q] %s`, id, rest) }

func memJS(id string) string {
	return fmt.Sprintf(`document.querySelector('#memory-list li[data-id=%q]')`, id)
}

// memText is the text the list shows for a memory, "" when it is not there.
func (b *browser) memText(id string) string {
	return evalJS[string](b, fmt.Sprintf(`(%s?.querySelector('[data-role=text]')?.textContent) ?? ''`, memJS(id)))
}
