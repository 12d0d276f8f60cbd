package devapi_test

import (
	"net/http"
	"testing"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/devapi"
)

// TestServiceError_CoordinatorBehindIsRetryable503: a read whose
// coordinators had not applied the gateway's last seen index, after the
// client asked again until its timeout, is 503 with retry-after (a
// follower catching up is soon over), the service's code kept in
// details.reason and its indexes in the message.
func TestServiceError_CoordinatorBehindIsRetryable503(t *testing.T) {
	e := devapi.ServiceErrorOf(api.Errorf(api.CodeCoordinatorBehind, "coordinator c1 has applied raft index 7, the request wants 9 (within 1s)"))
	reason, _ := e.Details.(map[string]string)["reason"]
	if e.Status != http.StatusServiceUnavailable || e.Code != devapi.CodeServiceUnavailable || e.Header["retry-after"] != "1" ||
		reason != api.CodeCoordinatorBehind || e.Message != "coordinator c1 has applied raft index 7, the request wants 9 (within 1s)" {
		t.Fatalf("coordinator_behind maps to %d %s %v %q %v", e.Status, e.Code, e.Header, e.Message, e.Details)
	}
}
