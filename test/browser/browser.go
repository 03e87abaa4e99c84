// Package browser drives a real headless Chromium from tests, over the
// DevTools protocol (chromedp): the operator console's tests log in with
// the keyboard, read what each page shows, check it on a phone's viewport
// and save screenshots as test artefacts.
//
// Chromium is Debian's package, pinned by the Makefile (make chromium);
// $CHROMIUM names the binary (default /usr/bin/chromium). A test that
// needs it fails, never skips, when it is not there.
//
// Every Browser has a fresh profile directory, so no cookie or cache
// crosses tests, and every action is bounded: ActionTimeout for one step,
// Lifetime for the whole browser. Waits poll the page; nothing sleeps.
//
//	b := browser.New(t)
//	b.Navigate(url)
//	b.TabTo("#key")
//	b.Type("secret\r")
//	b.WaitText("h1", "Backends")
//	b.CheckPhone("backends")
//	b.Screenshot("backends")
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// DefaultChromium is where Debian's chromium package puts its launcher.
const DefaultChromium = "/usr/bin/chromium"

// Bounds of the browser's work.
const (
	// ActionTimeout bounds one step (a navigation, a key press, a wait).
	// Generous: the tests share two cores with the processes under test.
	ActionTimeout = 30 * time.Second
	// Lifetime bounds a Browser altogether; it is stopped after it.
	Lifetime = 10 * time.Minute
	// pollEvery is how often a wait looks at the page again.
	pollEvery = 50 * time.Millisecond
)

// Phone is the viewport CheckPhone lays pages out in: a common phone's
// CSS pixels (390×844, a 6.1" phone), at its device pixel ratio.
var Phone = Viewport{Width: 390, Height: 844, Scale: 3, Mobile: true}

// Desktop is the viewport a Browser starts in.
var Desktop = Viewport{Width: 1280, Height: 900, Scale: 1}

// Viewport is an emulated screen.
type Viewport struct {
	Width, Height int64
	Scale         float64
	Mobile        bool
}

// Browser is one Chromium with one tab, stopped when the test ends.
type Browser struct {
	t   testing.TB
	ctx context.Context // the tab's; ends with the browser

	artifacts string
	shots     *atomic.Int32 // numbers the directory's files in the order saved
}

// artifactDirs are the directories this test binary has written to: each
// is emptied of an earlier run's files when first used, and numbers its
// files across every Browser of the test.
var artifactDirs sync.Map // dir -> *atomic.Int32

func artifactCounter(dir string) *atomic.Int32 {
	n, loaded := artifactDirs.LoadOrStore(dir, new(atomic.Int32))
	if !loaded {
		_ = os.RemoveAll(dir)
	}
	return n.(*atomic.Int32)
}

// ChromiumPath is the Chromium binary the tests run: $CHROMIUM, or
// DefaultChromium.
func ChromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return DefaultChromium
}

// New starts a headless Chromium with a fresh profile and opens a blank
// tab. It fails the test when Chromium is missing or does not start.
func New(t testing.TB) *Browser {
	t.Helper()
	exe := ChromiumPath()
	if _, err := os.Stat(exe); err != nil {
		t.Fatalf("chromium is not installed at %s (%v): run `make chromium` (Debian's chromium package, pinned), or set CHROMIUM to its path", exe, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(int(Desktop.Width), int(Desktop.Height)),
		// No GPU on a build machine; software rendering for screenshots.
		chromedp.DisableGPU,
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to start as root with its sandbox on (the
		// sandbox drops privileges through user namespaces or a setuid
		// helper, which root in a container does not get). CI and build
		// containers run the tests as root; the browser only ever loads
		// the local pages under test, so running its renderers
		// unsandboxed there risks nothing the test does not control.
		opts = append(opts, chromedp.NoSandbox)
	}
	life, stopLife := context.WithTimeout(context.Background(), Lifetime)
	allocCtx, stopAlloc := chromedp.NewExecAllocator(life, opts...)
	ctx, stopTab := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(format string, args ...any) {
		// Protocol noise from the browser is not the test's failure, but
		// belongs in its log.
		t.Logf("chromium: "+format, args...)
	}))
	dir := ArtifactsDir(t)
	b := &Browser{t: t, ctx: ctx, artifacts: dir, shots: artifactCounter(dir)}
	t.Cleanup(func() {
		if t.Failed() {
			b.saveFailure()
		}
		stopTab()
		stopAlloc()
		stopLife()
	})
	// The first action starts the browser and binds it to ctx (not to
	// a step's timeout).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	return b
}

// With is the same browser and tab for a subtest: its failures are t's,
// its screenshots go to t's artefacts directory, and when t fails the page
// is saved there. (A subtest must not fail its parent test.)
func (b *Browser) With(t testing.TB) *Browser {
	dir := ArtifactsDir(t)
	sub := &Browser{t: t, ctx: b.ctx, artifacts: dir, shots: artifactCounter(dir)}
	t.Cleanup(func() {
		if t.Failed() {
			sub.saveFailure()
		}
	})
	return sub
}

// step runs actions with ActionTimeout.
func (b *Browser) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, ActionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// Navigate opens url and waits for the page to load.
func (b *Browser) Navigate(url string) {
	b.t.Helper()
	b.step("navigate to "+url, chromedp.Navigate(url))
}

// Location is the tab's current URL.
func (b *Browser) Location() string {
	b.t.Helper()
	return Eval[string](b, `location.href`)
}

// Eval evaluates a JavaScript expression in the page and decodes its
// value into T.
func Eval[T any](b *Browser, expr string) T {
	b.t.Helper()
	v, err := eval[T](b, expr)
	if err != nil {
		b.t.Fatalf("browser: evaluate %s: %v", expr, err)
	}
	return v
}

func eval[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, ActionTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// WaitFor polls the page until the JavaScript expression pred is true,
// and fails the test after ActionTimeout, saying what it waited for.
// A page that is being replaced (a form submitted, a link followed) is
// waited out: an evaluation that fails meanwhile is polled again.
func (b *Browser) WaitFor(what, pred string) {
	b.t.Helper()
	deadline := time.Now().Add(ActionTimeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, err := eval[bool](b, pred)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("browser: %s: not within %v (last: %v, error %v) on %s", what, ActionTimeout, ok, err, b.locationOrErr())
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatalf("browser: %s: %v", what, b.ctx.Err())
		case <-tick.C:
		}
	}
}

func (b *Browser) locationOrErr() string {
	loc, err := eval[string](b, `location.href`)
	if err != nil {
		return "(no page: " + err.Error() + ")"
	}
	return loc
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// WaitText waits until the first element matching the CSS selector sel
// exists and its text (innerText, as a reader sees it) contains want,
// and returns that text.
func (b *Browser) WaitText(sel, want string) string {
	b.t.Helper()
	b.WaitFor(fmt.Sprintf("%s shows %q", sel, want),
		fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.innerText.includes(%s); })()`, js(sel), js(want)))
	return b.Text(sel)
}

// Text is the text (innerText) of the first element matching the CSS
// selector sel, waiting until there is one.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	b.WaitFor(sel+" exists", fmt.Sprintf(`document.querySelector(%s) !== null`, js(sel)))
	return Eval[string](b, fmt.Sprintf(`document.querySelector(%s).innerText`, js(sel)))
}

// Texts is the text of every element matching the CSS selector sel, in
// document order (none: an empty list).
func (b *Browser) Texts(sel string) []string {
	b.t.Helper()
	return Eval[[]string](b, fmt.Sprintf(`Array.from(document.querySelectorAll(%s), e => e.innerText)`, js(sel)))
}

// Fill types text into the field matching the CSS selector sel, after
// clearing it, as a user clicking into it and typing would.
func (b *Browser) Fill(sel, text string) {
	b.t.Helper()
	b.step("fill "+sel, chromedp.Clear(chromedp.CSS(sel)), chromedp.SendKeys(chromedp.CSS(sel), text))
}

// Type sends text as key presses to whatever has the focus: printable
// characters, "\t" as Tab and "\r" as Enter (kb.Tab, kb.Enter).
func (b *Browser) Type(text string) {
	b.t.Helper()
	b.step(fmt.Sprintf("type %q", text), chromedp.KeyEvent(text))
}

// Press presses the Tab key (or another) once, on whatever has the focus.
func (b *Browser) Press(key string) {
	b.t.Helper()
	b.step(fmt.Sprintf("press %q", key), chromedp.KeyEvent(key))
}

// Focused describes the element with the focus: its tag, and its id or
// name when it has one ("input#key", "button", "body").
func (b *Browser) Focused() string {
	b.t.Helper()
	return Eval[string](b, `(() => { const e = document.activeElement; if (!e) return ""; return e.tagName.toLowerCase() + (e.id ? "#" + e.id : e.name ? "[name=" + e.name + "]" : ""); })()`)
}

// TabTo presses Tab until the element matching the CSS selector sel has
// the focus, as a keyboard user reaches it, and fails the test when it is
// not reached within max presses (so an element the keyboard cannot reach
// fails) or shows no focus ring once reached (CheckFocusVisible). It
// returns the presses taken.
func (b *Browser) TabTo(sel string, max int) int {
	b.t.Helper()
	isFocused := fmt.Sprintf(`document.activeElement === document.querySelector(%s)`, js(sel))
	b.WaitFor(sel+" exists", fmt.Sprintf(`document.querySelector(%s) !== null`, js(sel)))
	var seen []string
	for n := 1; n <= max; n++ {
		b.Press("\t")
		if Eval[bool](b, isFocused) {
			b.CheckFocusVisible()
			return n
		}
		seen = append(seen, b.Focused())
	}
	b.t.Fatalf("browser: %s not reached with %d Tab presses; the focus went %v", sel, max, seen)
	return 0
}

// focusRing tells whether the focused element is drawn with a focus
// indicator: an outline (the browser's own ring is outline-style auto) or
// a box shadow.
const focusRing = `(() => { const e = document.activeElement; if (!e || e === document.body) return false;
  const st = getComputedStyle(e);
  return (st.outlineStyle !== "none" && parseFloat(st.outlineWidth) > 0) || st.boxShadow !== "none"; })()`

// CheckFocusVisible fails the test unless the element with the focus
// shows that it has it (a keyboard user must see where they are).
func (b *Browser) CheckFocusVisible() {
	b.t.Helper()
	if !Eval[bool](b, focusRing) {
		b.t.Errorf("browser: %s has the focus but shows no focus ring (outline or box shadow)", b.Focused())
	}
}

// SetViewport emulates a screen: its CSS size, pixel ratio and whether it
// is a mobile device (which makes the page's meta viewport count).
func (b *Browser) SetViewport(v Viewport) {
	b.t.Helper()
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(v.Scale)}
	if v.Mobile {
		opts = append(opts, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	b.step(fmt.Sprintf("viewport %dx%d", v.Width, v.Height), chromedp.EmulateViewport(v.Width, v.Height, opts...))
}

// layout is what CheckPhone measures of a page.
type layout struct {
	LayoutWidth float64  `json:"layoutWidth"`
	DocWidth    float64  `json:"docWidth"`
	BodyWidth   float64  `json:"bodyWidth"`
	FontSize    float64  `json:"fontSize"`
	Overflowing []string `json:"overflowing"`
}

// measureLayout measures against the layout viewport (clientWidth of the
// root), which is the phone's width when the page has a meta viewport of
// width=device-width (innerWidth, the visual viewport, grows when a phone
// zooms out to fit content that overflows).
const measureLayout = `(() => {
  const w = document.documentElement.clientWidth;
  const over = [];
  for (const e of document.body.querySelectorAll("*")) {
    if (over.length >= 5) break;
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > w + 1) over.push(e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\s+/).join(".") : ""));
  }
  return {layoutWidth: w, docWidth: document.documentElement.scrollWidth, bodyWidth: document.body.scrollWidth,
          fontSize: parseFloat(getComputedStyle(document.body).fontSize), overflowing: over};
})()`

// CheckPhone fails the test unless the current page is readable on a
// phone (PhoneProblems says why not).
func (b *Browser) CheckPhone(name string) {
	b.t.Helper()
	for _, p := range b.PhoneProblems(name) {
		b.t.Errorf("%s on a phone: %s", name, p)
	}
}

// PhoneProblems lays the current page out in the Phone viewport and says
// what makes it unreadable there: the page does not lay out at the phone's
// width (it lacks a meta viewport of width=device-width: a phone would
// show a shrunken desktop page), something makes the page wider than the
// screen (the page body scrolls sideways; a wide table must scroll inside
// its own box), or the body text is under 12 CSS pixels. It saves a
// screenshot named name+"-phone" and restores the Desktop viewport.
func (b *Browser) PhoneProblems(name string) []string {
	b.t.Helper()
	b.SetViewport(Phone)
	defer b.SetViewport(Desktop)
	// The emulated screen takes effect with the next layout.
	b.WaitFor("phone screen", fmt.Sprintf(`screen.width === %d`, Phone.Width))
	l := Eval[layout](b, measureLayout)
	b.Screenshot(name + "-phone")
	var problems []string
	if l.LayoutWidth != float64(Phone.Width) {
		problems = append(problems, fmt.Sprintf("laid out %v CSS pixels wide, want %d (a meta viewport of width=device-width)", l.LayoutWidth, Phone.Width))
	} else if l.DocWidth > l.LayoutWidth || l.BodyWidth > l.LayoutWidth {
		problems = append(problems, fmt.Sprintf("the page is %v (body %v) CSS pixels wide on a %v wide screen: it scrolls sideways; wider elements: %v",
			l.DocWidth, l.BodyWidth, l.LayoutWidth, l.Overflowing))
	}
	if l.FontSize < 12 {
		problems = append(problems, fmt.Sprintf("body text %v CSS pixels, want at least 12", l.FontSize))
	}
	return problems
}

// Screenshot saves a full-page PNG of the tab as
// <ArtifactsDir>/<nn>-<name>.png and returns its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, ActionTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("browser: screenshot %s: %v", name, err)
	}
	path, err := b.save(name+".png", png)
	if err != nil {
		b.t.Fatalf("browser: screenshot %s: %v", name, err)
	}
	return path
}

func (b *Browser) save(name string, data []byte) (string, error) {
	if err := os.MkdirAll(b.artifacts, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(b.artifacts, fmt.Sprintf("%02d-%s", b.shots.Add(1), safeName(name)))
	return path, os.WriteFile(path, data, 0o644)
}

// saveFailure keeps what the tab showed when the test failed: a
// screenshot and the page's HTML.
func (b *Browser) saveFailure() {
	ctx, cancel := context.WithTimeout(b.ctx, ActionTimeout)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		if p, err := b.save("failure.png", png); err == nil {
			b.t.Logf("browser: the page at failure: %s", p)
		}
	}
	if html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); err == nil {
		_, _ = b.save("failure.html", []byte(html))
	}
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// ArtifactsDir is where t's screenshots go: $SWITCHBOARD_ARTIFACTS/<test>
// when that is set (CI collects that directory), otherwise
// artifacts/<test> in the test module (test/artifacts/<test> in the
// repository, ignored by git). Subtests get a directory each.
func ArtifactsDir(t testing.TB) string {
	base := os.Getenv("SWITCHBOARD_ARTIFACTS")
	if base == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatalf("browser: artefacts: %v (set SWITCHBOARD_ARTIFACTS)", err)
		}
		base = filepath.Join(root, "artifacts")
	}
	parts := strings.Split(t.Name(), "/")
	for i := range parts {
		parts[i] = safeName(parts[i])
	}
	return filepath.Join(append([]string{base}, parts...)...)
}

// moduleRoot is the directory of the go.mod above the working directory
// (go test runs a test in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
