package main

import "testing"

func TestBrokerProcs(t *testing.T) {
	for _, tc := range []struct {
		setting string
		env     bool
		cores   int
		cpus    int
		want    int
		bad     bool
	}{
		{"", false, 2, 2, 5, false}, // the default: one for each loop and persister, and a spare
		{"", false, 1, 1, 3, false},
		{"", true, 2, 2, 2, false},   // GOMAXPROCS in the environment: the runtime's choice stands
		{"", false, 2, 8, 2, false},  // a CPU quota below the CPUs: none beyond it
		{"4", true, 2, 8, 4, false},  // the setting wins over all
		{"1", false, 8, 8, 1, false}, // even below the cores
		{"0", false, 2, 2, 0, true},
		{"-3", false, 2, 2, 0, true},
		{"two", false, 2, 2, 0, true},
		{"8", false, 2, 2, 8, false}, // four per CPU, at least 8
		{"9", false, 2, 2, 0, true},  // past it: a typo, refused
		{"16", false, 4, 4, 16, false},
		{"100000", false, 2, 2, 0, true},
	} {
		got, err := brokerProcs(tc.setting, tc.env, tc.cores, tc.cpus)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("brokerProcs(%q, %v, %d, %d) = %d, %v; want %d, error %v", tc.setting, tc.env, tc.cores, tc.cpus, got, err, tc.want, tc.bad)
		}
	}
}
