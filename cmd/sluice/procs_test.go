package main

import "testing"

func TestBrokerProcs(t *testing.T) {
	for _, tc := range []struct {
		setting string
		env     bool
		cores   int
		want    int
		bad     bool
	}{
		{"", false, 2, 3, false},  // the default: a spare processor
		{"", true, 2, 2, false},   // GOMAXPROCS in the environment: the runtime's choice stands
		{"4", true, 2, 4, false},  // the setting wins over both
		{"1", false, 8, 1, false}, // even below the cores
		{"0", false, 2, 0, true},
		{"-3", false, 2, 0, true},
		{"two", false, 2, 0, true},
	} {
		got, err := brokerProcs(tc.setting, tc.env, tc.cores)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("brokerProcs(%q, %v, %d) = %d, %v; want %d, error %v", tc.setting, tc.env, tc.cores, got, err, tc.want, tc.bad)
		}
	}
}
