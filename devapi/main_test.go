package devapi_test

import (
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }
