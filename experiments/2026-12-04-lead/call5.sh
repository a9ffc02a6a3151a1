#!/usr/bin/env bash
# Device call 5 (H200): per decode row, HEAD's route in HEAD's routed library (build/_ab/rec), the same variant in the
# build of call 4 (the prefetch as kept) and call 4's winner where it differs, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, unpack, ab_routes, finish
unpack all
NEW=/tmp/ab/build/_all/kimi_linear_recurrent; OLD=build/_ab/rec/kimi_linear_recurrent
cp bench/results/h200-2026-12-04-lead/call4/tune.log $O/tune.log   # win() reads call 4's winners
declare -A ROUTE=([D3:v_first]=2674d2450fe7 [D3:k_first]=6a5ac3c71ebb [D2:v_first]=554e3bb662b7 [D2:k_first]=82cd905a6b51
                  [M1:v_first]=d5e2e307b97b [M1:k_first]=76ee8257a276)
declare -A CLS=([D3]="1 decode-n256" [D2]="1 decode-n64" [M1]="8 decode-n64")
ab_routes $OLD $NEW D3:v_first D3:k_first D2:v_first D2:k_first M1:v_first M1:k_first
finish call5
