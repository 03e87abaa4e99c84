package browser_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/test/browser"
)

const (
	viewportMeta = `<meta name="viewport" content="width=device-width, initial-scale=1">`
	goodKey      = "correct horse battery"
)

// site is a small server-rendered site like the console: a login form
// (a link before the field, so reaching it takes two Tabs), a page behind
// the login's cookie, and pages that are and are not readable on a phone.
func site(t *testing.T) *httptest.Server {
	page := func(w http.ResponseWriter, head, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>t</title><style>body{font:16px sans-serif;margin:8px}</style>%s</head><body>%s</body></html>`, head, body)
	}
	mux := http.NewServeMux()
	login := func(w http.ResponseWriter, msg string) {
		page(w, viewportMeta, `<h1>Sign in</h1><a href="/help">Help</a>`+msg+
			`<form method="post" action="/login"><label for="key">Operator key</label> <input id="key" name="key" type="password"> <button>Sign in</button></form>`)
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { login(w, "") })
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("key") != goodKey {
			w.WriteHeader(http.StatusUnauthorized)
			login(w, `<p class="error">That is not a valid operator key.</p>`)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "s", Value: "ok", Path: "/", HttpOnly: true})
		http.Redirect(w, r, "/home", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /home", func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("s"); err != nil || c.Value != "ok" {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		page(w, viewportMeta, `<h1>Welcome</h1><table><tr><td class="name">alpha</td><td class="name">beta</td></tr></table>`)
	})
	mux.HandleFunc("GET /autofocus", func(w http.ResponseWriter, r *http.Request) {
		page(w, viewportMeta, `<a href="/help">Help</a><form method="post" action="/login"><label for="key">Operator key</label> <input id="key" name="key" type="password" autofocus> <button>Sign in</button></form>`)
	})
	mux.HandleFunc("GET /noring", func(w http.ResponseWriter, r *http.Request) {
		page(w, viewportMeta+`<style>a:focus{outline:none}</style>`, `<a id="plain" href="/help">Help</a>`)
	})
	mux.HandleFunc("GET /wide", func(w http.ResponseWriter, r *http.Request) {
		page(w, viewportMeta, `<h1>Wide</h1><div id="banner" style="width:900px">too wide</div>`)
	})
	mux.HandleFunc("GET /nometa", func(w http.ResponseWriter, r *http.Request) {
		page(w, "", `<h1>No viewport</h1><p>A desktop page.</p>`)
	})
	mux.HandleFunc("GET /tiny", func(w http.ResponseWriter, r *http.Request) {
		page(w, viewportMeta+`<style>body{font-size:9px}</style>`, `<h1>Tiny</h1><p>Small print.</p>`)
	})
	mux.HandleFunc("GET /scrolled", func(w http.ResponseWriter, r *http.Request) {
		page(w, viewportMeta, `<h1>Table</h1><div style="overflow-x:auto"><table style="width:900px"><tr><td>a wide table that scrolls in its box</td></tr></table></div>`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// A keyboard user logs in: Tab past the link to the key field, type the
// key, Enter submits; the page behind the login shows, and is readable on
// a phone; a screenshot lands in the test's artefacts directory.
func TestLoginByKeyboard(t *testing.T) {
	t.Setenv("SWITCHBOARD_ARTIFACTS", t.TempDir())
	srv := site(t)
	b := browser.New(t)
	b.Navigate(srv.URL + "/")
	if n := b.TabTo("#key", 5); n != 2 {
		t.Fatalf("reached the key field with %d Tabs, want 2 (the Help link first)", n)
	}
	if f := b.Focused(); f != "input#key" {
		t.Fatalf("focus on %q", f)
	}
	b.Type(goodKey + "\r")
	b.WaitText("h1", "Welcome")
	if loc := b.Location(); loc != srv.URL+"/home" {
		t.Fatalf("after login at %s, want /home", loc)
	}
	if got := b.Texts("td.name"); strings.Join(got, ",") != "alpha,beta" {
		t.Fatalf("cells %q", got)
	}
	b.CheckPhone("home")
	path := b.Screenshot("home")
	if dir := browser.ArtifactsDir(t); filepath.Dir(path) != dir || dir != filepath.Join(os.Getenv("SWITCHBOARD_ARTIFACTS"), "TestLoginByKeyboard") {
		t.Fatalf("screenshot at %s, artefacts dir %s", path, dir)
	}
	png, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Fatalf("screenshot %s: %d bytes, %v; want a PNG", path, len(png), err)
	}
	// The phone's screenshot was saved before, numbered first.
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "01-home-phone.png")); err != nil || filepath.Base(path) != "02-home.png" {
		t.Fatalf("artefacts: %s, %v", path, err)
	}
}

// TabTo walks the whole tab order: from a field that has the focus
// already (autofocus), Tab leaves it, goes past the button and around to
// the start of the page, back to the field.
func TestTabToWrapsAround(t *testing.T) {
	t.Setenv("SWITCHBOARD_ARTIFACTS", t.TempDir())
	srv := site(t)
	b := browser.New(t)
	b.Navigate(srv.URL + "/autofocus")
	b.WaitFor("autofocus", `document.activeElement === document.querySelector("#key")`)
	n := b.TabTo("#key", 10)
	// At least: the button, the link at the start, the field.
	if n < 3 {
		t.Fatalf("back to the field in %d Tabs, want the whole round", n)
	}
}

// A link whose focus ring the page's style removes fails TabTo's check.
func TestFocusRingRequired(t *testing.T) {
	t.Setenv("SWITCHBOARD_ARTIFACTS", t.TempDir())
	srv := site(t)
	r := &recorder{TB: t}
	b := browser.New(t)
	b.Navigate(srv.URL + "/noring")
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.With(r).TabTo("#plain", 3)
	}()
	<-done
	if !strings.Contains(r.errors, "shows no focus ring") {
		t.Fatalf("errors %q, want the missing focus ring", r.errors)
	}
}

// A wrong key typed with Fill and submitted with Enter keeps the login
// page and shows the error; nothing behind the login opens.
func TestWrongKey(t *testing.T) {
	t.Setenv("SWITCHBOARD_ARTIFACTS", t.TempDir())
	srv := site(t)
	b := browser.New(t)
	b.Navigate(srv.URL + "/")
	b.Fill("#key", "wrong key")
	b.Press("\r")
	b.WaitText(".error", "not a valid operator key")
	b.Navigate(srv.URL + "/home")
	b.WaitText("h1", "Sign in")
}

// The phone check finds what makes a page unreadable on a phone, and
// passes a wide table that scrolls in its own box.
func TestPhoneProblems(t *testing.T) {
	t.Setenv("SWITCHBOARD_ARTIFACTS", t.TempDir())
	srv := site(t)
	b := browser.New(t)
	for _, c := range []struct{ path, want string }{
		{"/wide", "scrolls sideways"},
		{"/nometa", "meta viewport"},
		{"/tiny", "body text 9"},
		{"/scrolled", ""},
	} {
		b.Navigate(srv.URL + c.path)
		got := strings.Join(b.PhoneProblems(strings.Trim(c.path, "/")), "; ")
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: problems %q, want %q", c.path, got, c.want)
		}
		if c.path == "/wide" && !strings.Contains(got, "div#banner") {
			t.Errorf("%s: problems %q do not name the wide element", c.path, got)
		}
	}
	// Back on the desktop viewport afterwards.
	if w := browser.Eval[float64](b, `window.innerWidth`); w != float64(browser.Desktop.Width) {
		t.Fatalf("after the phone check the page is %v wide, want %d", w, browser.Desktop.Width)
	}
}

// recorder is a testing.TB that records a fatal failure instead of
// failing the test, to check that New refuses to go on.
type recorder struct {
	testing.TB
	fatal, errors string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors += fmt.Sprintf(format, args...) + "\n"
}

// Failed is false: what the recorder records is not the test's failure
// (so a Browser's With does not save a failure page for it).
func (r *recorder) Failed() bool { return false }
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Without Chromium, New fails the test (never skips), saying how to get it.
func TestMissingChromiumFails(t *testing.T) {
	t.Setenv("CHROMIUM", filepath.Join(t.TempDir(), "no-chromium"))
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		browser.New(r)
		t.Error("New returned without Chromium")
	}()
	<-done
	if !strings.Contains(r.fatal, "make chromium") {
		t.Fatalf("failure %q, want it to name make chromium", r.fatal)
	}
}
