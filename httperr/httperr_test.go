package httperr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStatusAndMessage(t *testing.T) {
	assert.Equal(t, StatusClientClosed, Status(context.Canceled))
	assert.Equal(t, StatusClientClosed, Status(fmt.Errorf("reading: %w", context.Canceled)))
	assert.Equal(t, http.StatusInternalServerError, Status(errors.New("x")))
	err := fmt.Errorf("wrapped: %w", New(http.StatusTeapot, "teapot", nil))
	assert.Equal(t, http.StatusTeapot, Status(err))
	cause := errors.New("connection refused")
	err = New(http.StatusBadGateway, "ollama unreachable", cause)
	assert.Equal(t, "ollama unreachable: connection refused", err.Error())
	assert.ErrorIs(t, err, cause)
}
