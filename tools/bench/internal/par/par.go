// Package par runs the loaders' requests concurrently.
package par

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"kinformer.dev/bench/internal/cli"
)

// Each calls fn(i) for every i in [0, n) on `workers` goroutines and returns how many calls
// failed; the first five errors are printed to stderr, prefixed with cli.Name.
func Each(n, workers int, fn func(i int) error) int64 {
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					if errs.Add(1) <= 5 {
						fmt.Fprintf(os.Stderr, "%s: %v\n", cli.Name, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	return errs.Load()
}
