package ui_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/fadcedab/adk/devapi/ui"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHandler_ServesTheEmbeddedFilesWithTheirTypes(t *testing.T) {
	srv := httptest.NewServer(ui.Handler())
	defer srv.Close()
	for path, want := range map[string]string{
		"/":           "text/html; charset=utf-8",
		"/index.html": "text/html; charset=utf-8",
		"/app.js":     "text/javascript; charset=utf-8",
		"/app.css":    "text/css; charset=utf-8",
	} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != want || len(body) == 0 {
			t.Errorf("%s: %d %q (%d bytes)", path, res.StatusCode, res.Header.Get("Content-Type"), len(body))
		}
		if res.Header.Get("Content-Security-Policy") != ui.ContentSecurityPolicy || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: security headers %v", path, res.Header)
		}
	}
	for _, path := range []string{"/nope", "/assets/app.js", "/../ui.go", "/doc.go"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, res.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", res.StatusCode)
	}
}

// TestAssets_SmallOfflineAndTextOnly holds the assets to the issue's
// rules: under 300 KiB, no address off this origin (the SVG namespace is a
// name, not a request), and no API that parses server data as markup.
func TestAssets_SmallOfflineAndTextOnly(t *testing.T) {
	total := 0
	urls := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	forbidden := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\('on`)
	err := filepath.WalkDir("assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		total += len(data)
		src := strings.ReplaceAll(string(data), "http://www.w3.org/2000/svg", "")
		if m := urls.FindString(src); m != "" {
			t.Errorf("%s names %q: the UI works offline", p, m)
		}
		if m := forbidden.FindString(src); m != "" {
			t.Errorf("%s uses %s: server data is written as text only", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > 300<<10 {
		t.Errorf("assets are %d bytes, over 300 KiB", total)
	}
	t.Logf("assets: %d bytes", total)
}
