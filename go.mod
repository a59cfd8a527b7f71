module github.com/iopgw/iop

go 1.26
