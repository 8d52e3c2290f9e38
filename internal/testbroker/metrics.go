package testbroker

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Scrape reads the metrics endpoint at addr and returns the value of one sample line
// (its name with labels, as printed), or -1 when there is no such line.
func Scrape(t testing.TB, addr, sample string) float64 {
	t.Helper()
	v, err := ScrapeValue(addr, sample)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ScrapeValue is Scrape for a goroutine other than the test's: it returns what went
// wrong instead of failing the test.
func ScrapeValue(addr, sample string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("metric %s: %w", sample, err)
			}
			return f, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("cannot read the metrics of %s: %w", addr, err)
	}
	return -1, nil
}
