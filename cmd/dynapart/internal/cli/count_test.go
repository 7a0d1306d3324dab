package cli

import "fmt"

func ExampleCount() {
	fmt.Println(Count(0, "item"))
	fmt.Println(Count(1, "item"))
	fmt.Println(Count(int64(2), "slot"))
	// Output:
	// 0 items
	// 1 item
	// 2 slots
}
