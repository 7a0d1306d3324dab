package worker

import (
	"fmt"
	"strconv"
	"strings"
)

// slotCheckpoint is what the lease's checkpoint holds: the pass number, whether the pass met items
// that still need another pass (retries, items claimed elsewhere), and the scan position.
type slotCheckpoint struct {
	pass  int
	dirty bool
	scan  string
}

const checkpointPrefix = "dp1"

func (s slotCheckpoint) encode() string {
	d := "0"
	if s.dirty {
		d = "1"
	}
	return checkpointPrefix + "|" + strconv.Itoa(s.pass) + "|" + d + "|" + s.scan
}

func decodeSlotCheckpoint(v string) (slotCheckpoint, error) {
	if v == "" {
		return slotCheckpoint{}, nil
	}
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 || parts[0] != checkpointPrefix {
		return slotCheckpoint{}, fmt.Errorf("dynapart: malformed slot checkpoint (want %s|pass|dirty|scan)", checkpointPrefix)
	}
	pass, err := strconv.Atoi(parts[1])
	if err != nil || pass < 0 || (parts[2] != "0" && parts[2] != "1") {
		return slotCheckpoint{}, fmt.Errorf("dynapart: malformed slot checkpoint header %q", parts[0]+"|"+parts[1]+"|"+parts[2])
	}
	return slotCheckpoint{pass: pass, dirty: parts[2] == "1", scan: parts[3]}, nil
}
